// Applies OpenAI `stop` strings to streamed text: holds back what could still become a stop string, cuts before one.

export interface StopMatchResult {
  /** Text that can be sent to the client now. */
  emit: string;
  /** A stop string completed: generation should end; nothing after `emit` is ever output. */
  stopped: boolean;
}

/**
 * Feed generated text in any chunking; the output does not depend on it. A stop string matches at the first
 * position where one ends (as if text arrived a character at a time); the output is cut where it starts. When
 * several end at the same position, the longest (earliest starting) one wins.
 */
export class StopMatcher {
  readonly #stops: readonly string[];
  #held = "";
  #stopped = false;

  constructor(stops: readonly string[]) {
    // An empty stop string would match everywhere; OpenAI ignores it, so do we.
    this.#stops = [...new Set(stops.filter((stop) => stop !== ""))];
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  push(text: string): StopMatchResult {
    if (this.#stopped) return { emit: "", stopped: true };
    if (this.#stops.length === 0) return { emit: text, stopped: false };

    const buffer = this.#held + text;
    const match = this.#firstMatch(buffer);
    if (match !== undefined) {
      this.#stopped = true;
      this.#held = "";
      return { emit: buffer.slice(0, match), stopped: true };
    }
    const hold = this.#partialMatchLength(buffer);
    this.#held = buffer.slice(buffer.length - hold);
    return { emit: buffer.slice(0, buffer.length - hold), stopped: false };
  }

  /** Held-back text, at the end of generation without a stop match. */
  flush(): string {
    const held = this.#held;
    this.#held = "";
    return this.#stopped ? "" : held;
  }

  /** Start index of the match that ends first, or undefined. */
  #firstMatch(buffer: string): number | undefined {
    let bestStart: number | undefined;
    let bestEnd = Number.POSITIVE_INFINITY;
    for (const stop of this.#stops) {
      // A string's first occurrence is also where it first ends.
      const start = buffer.indexOf(stop);
      if (start < 0) continue;
      const end = start + stop.length;
      if (end < bestEnd || (end === bestEnd && bestStart !== undefined && start < bestStart)) {
        bestStart = start;
        bestEnd = end;
      }
    }
    return bestStart;
  }

  /** Length of the longest suffix of `buffer` that is a proper prefix of some stop string. */
  #partialMatchLength(buffer: string): number {
    let longest = 0;
    for (const stop of this.#stops) {
      for (let length = Math.min(stop.length - 1, buffer.length); length > longest; length--) {
        if (buffer.endsWith(stop.slice(0, length))) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  }
}
