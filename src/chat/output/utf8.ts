// Turns generated tokens into text without ever splitting a UTF-8 character across two emitted pieces.

/** The slice of node-llama-cpp's `LlamaModel` this needs (its `detokenize` signature in 3.22.1). */
export interface Detokenizer {
  detokenize(tokens: readonly number[], specialTokens?: boolean, lastTokens?: readonly number[]): string;
}

export interface Utf8TokenDecoderOptions {
  /** Render special tokens as their text (default false: they decode to nothing). */
  specialTokens?: boolean;
  /** Tokens before the first generated one (the prompt's tail): lets the detokenizer decide on a leading space. */
  lastTokens?: readonly number[];
  /** Tokens without any new complete character after which the pending text is emitted anyway (default 4). */
  maxStalledTokens?: number;
  /** Longest token group decoded at once (default 64); see the class comment. */
  maxPendingTokens?: number;
}

// node-llama-cpp decodes an incomplete UTF-8 sequence as U+FFFD.
const REPLACEMENT = "\uFFFD";
// The library uses the last 3 tokens as context (`maxRecentDetokenizerTokens`); a few more cost nothing.
const CONTEXT_TOKENS = 8;

/**
 * Tokens are decoded as a group from the last point where all text was complete, and only text before a trailing
 * U+FFFD run is emitted: a byte-level token can end inside a character (an emoji often spans 2–4 tokens) and the
 * next one completes it. A UTF-8 character has at most 4 bytes and every token adds at least one, so a U+FFFD that
 * survives `maxStalledTokens` tokens is real invalid output and is emitted as is.
 *
 * A group only ends where a token boundary is also a character boundary. Tokens that all straddle characters (rare:
 * byte-level merges across CJK characters) make it grow, and each push decodes the whole group, so a group is cut
 * at `maxPendingTokens`; the character straddling that cut then comes out as U+FFFD (the price of a bound).
 */
export class Utf8TokenDecoder {
  readonly #detokenizer: Detokenizer;
  readonly #specialTokens: boolean;
  readonly #maxStalledTokens: number;
  readonly #maxPendingTokens: number;
  /** Recent tokens whose text is fully emitted: context for the detokenizer. */
  #context: number[];
  /** Tokens since the last complete point. */
  #pending: number[] = [];
  /** UTF-16 length of the pending tokens' text already emitted. */
  #emitted = 0;
  #stalled = 0;

  constructor(detokenizer: Detokenizer, options: Utf8TokenDecoderOptions = {}) {
    this.#detokenizer = detokenizer;
    this.#specialTokens = options.specialTokens ?? false;
    this.#maxStalledTokens = options.maxStalledTokens ?? 4;
    this.#maxPendingTokens = options.maxPendingTokens ?? 64;
    this.#context = [...(options.lastTokens ?? [])].slice(-CONTEXT_TOKENS);
  }

  /** Returns the text that is now complete (often "", never a partial character). */
  push(token: number): string {
    this.#pending.push(token);
    const text = this.#decode(this.#pending);
    const complete = text.length - trailingReplacementLength(text);
    if (complete === text.length) return this.#release(text);

    let emit = "";
    if (complete > this.#emitted) {
      emit = text.slice(this.#emitted, complete);
      this.#emitted = complete;
      this.#stalled = 0;
    } else {
      this.#stalled++;
    }
    if (this.#stalled >= this.#maxStalledTokens || this.#pending.length >= this.#maxPendingTokens) {
      emit += this.#release(text);
    }
    return emit;
  }

  /** Whatever is still pending, at the end of generation (may hold U+FFFD if the output ended mid-character). */
  flush(): string {
    if (this.#pending.length === 0) return "";
    return this.#release(this.#decode(this.#pending));
  }

  /** Emits the rest of the group's text, incomplete or not, and starts a new group. */
  #release(text: string): string {
    const emit = text.slice(this.#emitted);
    this.#commit();
    return emit;
  }

  #decode(tokens: readonly number[]): string {
    return this.#context.length > 0
      ? this.#detokenizer.detokenize(tokens, this.#specialTokens, this.#context)
      : this.#detokenizer.detokenize(tokens, this.#specialTokens);
  }

  #commit(): void {
    this.#context = [...this.#context, ...this.#pending].slice(-CONTEXT_TOKENS);
    this.#pending = [];
    this.#emitted = 0;
    this.#stalled = 0;
  }
}

function trailingReplacementLength(text: string): number {
  let length = 0;
  while (length < text.length && text[text.length - 1 - length] === REPLACEMENT) length++;
  return length;
}
