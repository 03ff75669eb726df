// Log probabilities of sampled tokens in OpenAI's shape, from the distribution node-llama-cpp's sampler drew from.
import type { SequenceEvaluateMetadataOptions, Token } from "node-llama-cpp";
import {
  LOGPROB_FLOOR,
  type SamplingParams,
  type TokenAlternative,
  type TokenLogprob,
  type TokenText,
} from "../types.js";

/** One step of a generator from `sequence.evaluateWithMetadata`: the token and what the sampler says about it. */
export interface SampledToken {
  token: Token;
  /** The sampled token's probability (requested when no alternatives are). */
  confidence?: number;
  /** Every candidate's probability, highest first (requested with top_logprobs > 0). */
  probabilities?: ReadonlyMap<Token, number>;
}

/**
 * What to ask the sampler for: nothing without logprobs; the chosen token's probability alone for
 * `top_logprobs: 0` (computed natively); the whole distribution (a Map over the vocabulary per token) otherwise.
 */
export function logprobMetadata(sampling: SamplingParams): SequenceEvaluateMetadataOptions {
  if (sampling.logprobs === undefined) return {};
  return sampling.logprobs === 0 ? { confidence: true } : { probabilities: true };
}

export function logprobOf(probability: number | undefined): number {
  if (probability === undefined || !(probability > 0)) return LOGPROB_FLOOR;
  return Math.max(LOGPROB_FLOOR, Math.log(probability));
}

/** What the vocabulary reads of a `LlamaModel`: its GGUF tokenizer metadata, and its detokenizer as a fallback. */
export interface VocabularySource {
  fileInfo: { metadata: { tokenizer?: { ggml?: object } } };
  detokenize(tokens: readonly Token[], specialTokens?: boolean): string;
}

/** The tokens of one model as text and bytes, read once per token from the GGUF vocabulary. */
export class Vocabulary {
  private readonly cache = new Map<Token, TokenText>();
  private readonly pieces: readonly string[];
  private readonly types: readonly number[];
  private readonly kind: string | undefined;

  constructor(private readonly model: VocabularySource) {
    const ggml = model.fileInfo.metadata.tokenizer?.ggml as
      | { model?: string; tokens?: readonly string[]; token_type?: readonly number[] }
      | undefined;
    this.pieces = ggml?.tokens ?? [];
    this.types = ggml?.token_type ?? [];
    this.kind = ggml?.model;
  }

  /** Token ids are 0 ≤ id < size. */
  get size(): number {
    return this.pieces.length;
  }

  text(token: Token): TokenText {
    let text = this.cache.get(token);
    if (text === undefined) {
      const bytes = this.bytes(token);
      text = { token: UTF8.decode(Uint8Array.from(bytes)), bytes };
      this.cache.set(token, text);
    }
    return text;
  }

  /**
   * The token's own bytes. Byte-level BPE (`gpt2`) pieces spell each byte as one character of GPT-2's byte
   * alphabet; SentencePiece (`llama`) pieces write a space as U+2581 and a lone byte as `<0xNN>`. Control and
   * user-defined tokens are their piece's text. Other tokenizers: the detokenized text (a partial character is
   * then U+FFFD, whose bytes are not the token's).
   */
  private bytes(token: Token): number[] {
    const piece = this.pieces[token];
    const type = this.types[token] ?? NORMAL;
    if (piece === undefined) return [...UTF8_ENCODER.encode(this.model.detokenize([token], true))];
    if (type === CONTROL || type === USER_DEFINED) return [...UTF8_ENCODER.encode(piece)];
    if (this.kind === "gpt2") {
      const bytes: number[] = [];
      for (const char of piece) {
        const byte = GPT2_BYTE_OF.get(char);
        if (byte === undefined) return [...UTF8_ENCODER.encode(piece)];
        bytes.push(byte);
      }
      return bytes;
    }
    if (this.kind === "llama") {
      const byte = type === BYTE ? /^<0x([0-9A-Fa-f]{2})>$/.exec(piece) : null;
      if (byte !== null) return [Number.parseInt(byte[1] as string, 16)];
      return [...UTF8_ENCODER.encode(piece.replaceAll("\u2581", " "))];
    }
    return [...UTF8_ENCODER.encode(this.model.detokenize([token], true))];
  }
}

/** Turns each sampled token into its OpenAI logprob entry with `top` alternatives. */
export class TokenLogprobs {
  constructor(
    private readonly vocabulary: Vocabulary,
    private readonly top: number,
  ) {}

  of(sample: SampledToken): TokenLogprob {
    const { token, probabilities } = sample;
    const probability = probabilities?.get(token) ?? sample.confidence;
    const topLogprobs: TokenAlternative[] = [];
    if (probabilities !== undefined && this.top > 0) {
      // The Map is ordered by probability, highest first (the addon sorts the candidates by logit).
      for (const [candidate, p] of probabilities) {
        if (topLogprobs.length >= this.top) break;
        topLogprobs.push({ ...this.vocabulary.text(candidate), logprob: logprobOf(p) });
      }
    }
    return { ...this.vocabulary.text(token), logprob: logprobOf(probability), topLogprobs };
  }
}

const UTF8 = new TextDecoder("utf-8");
const UTF8_ENCODER = new TextEncoder();
/** GGUF `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type). */
const NORMAL = 1;
const CONTROL = 3;
const USER_DEFINED = 4;
const BYTE = 6;

/** GPT-2's byte alphabet, reversed: printable bytes stand for themselves, the rest for U+0100 onwards in order. */
const GPT2_BYTE_OF: ReadonlyMap<string, number> = (() => {
  const map = new Map<string, number>();
  let next = 256;
  for (let byte = 0; byte < 256; byte++) {
    const printable =
      (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255);
    map.set(String.fromCodePoint(printable ? byte : next++), byte);
  }
  return map;
})();
