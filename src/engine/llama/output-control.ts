// Grammar compilation (cached) and budget steering: keeps grammar-constrained replies closable within max_tokens.
import {
  type Llama,
  type LlamaGrammar,
  LlamaGrammarEvaluationState,
  type LlamaModel,
  type Token,
  TokenBias,
} from "node-llama-cpp";
import { OutputParser } from "../../chat/output/parser.js";
import type { GenerationPlan } from "../../chat/output/plan.js";
import { grammarAccepts, setLogit } from "./llama-internals.js";

/** Compiled grammars kept by text: the same schema or tool set is compiled once, not per request. */
const GRAMMAR_CACHE_SIZE = 64;
/** Added to a steered token's logit: larger than any logit gap a model produces, so it always wins if allowed. */
const STEER = 100;
const THINK_CLOSE = "</think>";

/** Everything a request needs for structured output, prepared before admission. */
export interface PreparedOutput {
  plan: GenerationPlan;
  grammar: LlamaGrammar | undefined;
  /** Tokens the shortest complete answer may take (its length in characters: a token has at least one). */
  minimalTokens: number;
  closingTokens: number;
  /** Reasoning tokens after which the block is steered closed; Infinity without reasoning. */
  reasoningBudget: number;
}

/** Per-choice state: the parser of its output, its grammar state, its reasoning count. */
export interface ChoiceOutput {
  parser: OutputParser;
  grammarState: LlamaGrammarEvaluationState | undefined;
  reasoningTokens: number;
  /** The last characters generated, to continue a `</think>` already begun. */
  tail: string;
}

export class OutputControl {
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();
  private readonly none: TokenBias;

  constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly eogTokens: () => readonly Token[],
  ) {
    this.none = new TokenBias(model.tokenizer);
  }

  /** Compiles GBNF once per distinct text (LRU). A grammar that does not parse rejects (a Hearth bug). */
  grammar(text: string): Promise<LlamaGrammar> {
    let compiled = this.grammars.get(text);
    if (compiled !== undefined) {
      this.grammars.delete(text);
      this.grammars.set(text, compiled);
      return compiled;
    }
    compiled = this.llama.createGrammar({ grammar: text });
    compiled.catch(() => this.grammars.delete(text));
    this.grammars.set(text, compiled);
    while (this.grammars.size > GRAMMAR_CACHE_SIZE) {
      const oldest = this.grammars.keys().next().value as string;
      this.grammars.delete(oldest);
    }
    return compiled;
  }

  async prepare(plan: GenerationPlan, maxTokens: number): Promise<PreparedOutput> {
    const grammar = plan.grammar === undefined ? undefined : await this.grammar(plan.grammar);
    const minimalTokens = plan.minimalAnswer.length;
    const closingTokens = this.count(plan.closingText);
    let reasoningBudget = Number.POSITIVE_INFINITY;
    if (plan.parser.reasoning === "on") {
      // Keep room for the closing tag and an answer: a quarter of the budget, at least the shortest answer.
      const answerReserve =
        minimalTokens + closingTokens + this.count(THINK_CLOSE) + 4 + Math.floor(maxTokens / 4);
      reasoningBudget = Math.max(0, maxTokens - answerReserve);
    }
    return { plan, grammar, minimalTokens, closingTokens, reasoningBudget };
  }

  startChoice(prepared: PreparedOutput): ChoiceOutput {
    const grammar = prepared.grammar;
    return {
      parser: new OutputParser(prepared.plan.parser),
      grammarState:
        grammar === undefined ? undefined : new LlamaGrammarEvaluationState({ model: this.model, grammar }),
      reasoningTokens: 0,
      tail: "",
    };
  }

  /** The bias for a choice's next token, given the tokens it has left. */
  bias(prepared: PreparedOutput, choice: ChoiceOutput, remaining: number): TokenBias {
    const parser = choice.parser;
    if (parser.inReasoning) {
      const closeNow = choice.reasoningTokens >= prepared.reasoningBudget;
      return closeNow ? this.thinkCloser(choice) : this.none;
    }
    if (!parser.inStructure) return this.none;
    const reserve = parser.openCount + prepared.closingTokens + prepared.minimalTokens + 2;
    return remaining <= reserve ? this.closingBias(choice) : this.none;
  }

  /**
   * Favours tokens that close the open JSON (`"`, `}`, `]`, end of generation), then the shortest complete values
   * (`""`, `0`, `null`, `{}`), among those the grammar accepts now (checked first where the addon allows: a bias
   * on a token the grammar rejects is wasted).
   */
  private closingBias(choice: ChoiceOutput): TokenBias {
    const bias = new TokenBias(this.model.tokenizer);
    const state = choice.grammarState;
    if (state === undefined) return this.none;
    const scanner = choice.parser.scanner;
    for (const { token, text, eog, compact } of this.closingCandidates()) {
      if (!grammarAccepts(this.llama, state, token)) continue;
      if (eog) {
        setLogit(bias, token, STEER * 2);
        continue;
      }
      if (scanner === undefined) continue;
      const after = scanner.clone();
      after.push(text);
      const closed = scanner.openCount - (after.done ? 0 : after.openCount);
      // A comma reopens what a quote closed (`",` ends a value only to start another): it ranks below.
      const continues = text.includes(",") ? STEER / 5 : 0;
      if (closed > 0) setLogit(bias, token, STEER + 10 * closed - continues);
      else if (closed === 0 && !compact) setLogit(bias, token, STEER / 2);
      else if (compact) setLogit(bias, token, STEER / 4 - continues);
    }
    return bias;
  }

  /** Steers toward the rest of `</think>`, continuing whatever prefix of it the text already ends with. */
  private thinkCloser(choice: ChoiceOutput): TokenBias {
    const tail = choice.tail;
    let begun = 0;
    for (let length = Math.min(THINK_CLOSE.length - 1, tail.length); length > 0; length--) {
      if (tail.endsWith(THINK_CLOSE.slice(0, length))) {
        begun = length;
        break;
      }
    }
    const rest = THINK_CLOSE.slice(begun);
    const state = choice.grammarState;
    const bias = new TokenBias(this.model.tokenizer);
    for (const { token, text } of this.thinkCandidates()) {
      if (!rest.startsWith(text) && !(begun === 0 && text === THINK_CLOSE)) continue;
      if (state !== undefined && !grammarAccepts(this.llama, state, token)) continue;
      setLogit(bias, token, STEER + text.length);
    }
    return bias;
  }

  private closers: { token: Token; text: string; eog: boolean; compact: boolean }[] | undefined;
  private closingCandidates() {
    if (this.closers === undefined) {
      const closing = /^ ?(["}\]]+|0|null|true|false|\{\}|\[\])$/;
      // Separators without whitespace: a required key still to come costs fewer tokens written compactly.
      const compact = /^[,:"]+$/;
      this.closers = [];
      for (const token of this.vocabulary()) {
        const text = this.model.detokenize([token]);
        if (closing.test(text)) this.closers.push({ token, text, eog: false, compact: false });
        else if (compact.test(text)) this.closers.push({ token, text, eog: false, compact: true });
      }
      for (const token of this.eogTokens()) this.closers.push({ token, text: "", eog: true, compact: false });
    }
    return this.closers;
  }

  private thinkers: { token: Token; text: string }[] | undefined;
  private thinkCandidates() {
    if (this.thinkers === undefined) {
      this.thinkers = [];
      // The tag as one special token (Qwen3), or pieces of it (the default model: "</", "think", ">").
      for (const token of this.model.tokenize(THINK_CLOSE, true)) {
        if (this.model.detokenize([token], true) === THINK_CLOSE)
          this.thinkers.push({ token, text: THINK_CLOSE });
      }
      for (const token of this.vocabulary()) {
        const text = this.model.detokenize([token]);
        if (text !== "" && THINK_CLOSE.includes(text)) this.thinkers.push({ token, text });
      }
    }
    return this.thinkers;
  }

  private vocabularyCache: Token[] | undefined;
  private vocabulary(): Token[] {
    if (this.vocabularyCache === undefined) {
      const size = this.model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
      this.vocabularyCache = Array.from({ length: size }, (_, t) => t as Token);
    }
    return this.vocabularyCache;
  }

  private count(text: string): number {
    return text === "" ? 0 : this.model.tokenize(text, false).length;
  }
}
