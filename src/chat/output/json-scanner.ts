// Follows JSON text character by character: where a value ends and how much structure is still open.

/**
 * A small push scanner for one JSON value (which the grammar has already made well-formed): it only tracks
 * strings, escapes and bracket depth, which is all that is needed to find the value's end in a stream and to
 * estimate how many tokens it takes to close it.
 */
export class JsonScanner {
  #depth = 0;
  #inString = false;
  #escaped = false;
  #started = false;
  #done = false;
  /** A scalar at the top level (`12`, `true`): it ends at the first character that cannot continue it. */
  #scalar = false;

  get depth(): number {
    return this.#depth;
  }

  get inString(): boolean {
    return this.#inString;
  }

  get started(): boolean {
    return this.#started;
  }

  get done(): boolean {
    return this.#done;
  }

  /** Containers and strings still open: a lower bound on the closing characters still needed. */
  get openCount(): number {
    return this.#depth + (this.#inString ? 1 : 0);
  }

  /**
   * Feeds text; returns how many characters belong to the value (text.length while it is not finished). Text
   * after the value's end is not consumed.
   */
  push(text: string): number {
    for (let i = 0; i < text.length; i++) {
      if (this.#done) return i;
      const ch = text[i] as string;
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (ch === "\\") this.#escaped = true;
        else if (ch === '"') {
          this.#inString = false;
          if (this.#depth === 0) this.#done = true;
        }
        continue;
      }
      if (!this.#started) {
        if (/\s/.test(ch)) continue;
        this.#started = true;
      }
      if (this.#scalar) {
        if (/[\w.+-]/.test(ch)) continue;
        this.#done = true;
        return i;
      }
      if (ch === '"') this.#inString = true;
      else if (ch === "{" || ch === "[") this.#depth++;
      else if (ch === "}" || ch === "]") {
        this.#depth--;
        if (this.#depth === 0) this.#done = true;
      } else if (this.#depth === 0 && !/\s/.test(ch)) this.#scalar = true;
    }
    return text.length;
  }

  clone(): JsonScanner {
    const copy = new JsonScanner();
    copy.#depth = this.#depth;
    copy.#inString = this.#inString;
    copy.#escaped = this.#escaped;
    copy.#started = this.#started;
    copy.#done = this.#done;
    copy.#scalar = this.#scalar;
    return copy;
  }

  /** End of input: a top-level scalar ends here. */
  finish(): void {
    if (this.#scalar) this.#done = true;
  }
}
