// Incremental decoder of an upstream chat-completion SSE stream (any dialect) into Hearth's GenerationEvents.
import {
  type FinishReason,
  type GenerationEvent,
  LOGPROB_FLOOR,
  type TokenAlternative,
  type TokenLogprob,
  type UsageCounts,
} from "../types.js";
import { isRecord, UpstreamProtocolError, upstreamErrorFromFrame } from "./upstream-error.js";

export interface UpstreamStreamDecoderOptions {
  /** Choices the request asked for: a chunk with a larger index is a protocol error. */
  n: number;
  /**
   * The client asked for reasoning (thinking on). Default true. When false, an upstream's reasoning is not relayed
   * (its tokens still count): vLLM with a reasoning parser splits reasoning out whatever `enable_thinking` says, and
   * a client that did not ask gets no `reasoning` field, streamed or not (docs/compatibility.md).
   */
  reasoning?: boolean;
}

interface ChoiceState {
  finished: boolean;
  /** Upstream tool-call index → Hearth's call number (0, 1, … in the order calls appear). */
  calls: Map<number, number>;
  /** Hearth's number of the next new call. */
  nextCall: number;
  /** The call the last fragment belonged to: where an index-less fragment (older Ollama) continues. */
  lastCall: number | undefined;
  /** Logprobs that came in a chunk without text: they go with the next content. */
  logprobs: TokenLogprob[];
}

/** The usage as the upstream reported it; cached tokens may come from llama-server's `timings` instead. */
interface ReportedUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number | undefined;
  reasoningTokens: number | undefined;
}

/**
 * Reads the stream as SSE (data lines joined until a blank line; `:` comment lines are keep-alives) and maps each
 * chunk to events: `reasoning_content` (vLLM, SGLang, llama-server, DeepSeek) or `reasoning` (Hearth, Ollama,
 * newer vLLM) → a reasoning delta; content → a plain delta; OpenAI's tool-call deltas → the call's name event, then
 * its argument fragments; `finish_reason` → a `finish` event after the chunk's deltas (llama-server and others put
 * both in one chunk). The usage (on any chunk; the last one wins) becomes one `usage` event, last, at `[DONE]`.
 */
export class UpstreamStreamDecoder {
  readonly #choices: ChoiceState[];
  /** Text after the last complete line. */
  #pending = "";
  /** The data lines of the event being read. */
  #data: string[] = [];
  /** The `event:` field of the event being read (`error` marks an error event). */
  #eventName = "";
  #done = false;
  #started = false;
  #deltas = 0;
  #reported: ReportedUsage | undefined;
  /** llama-server's `timings.cache_n`: its prompt tokens taken from the cache. */
  #timingsCached: number | undefined;
  #usageEmitted = false;
  readonly #relayReasoning: boolean;

  constructor(options: UpstreamStreamDecoderOptions) {
    if (!Number.isInteger(options.n) || options.n < 1) {
      throw new RangeError(`n must be a positive integer, got ${options.n}`);
    }
    this.#relayReasoning = options.reasoning ?? true;
    this.#choices = Array.from({ length: options.n }, () => ({
      finished: false,
      calls: new Map<number, number>(),
      nextCall: 0,
      lastCall: undefined,
      logprobs: [],
    }));
  }

  /** True once the first delta or finish was decoded (retries are allowed only before). */
  get started(): boolean {
    return this.#started;
  }

  /** Non-empty deltas decoded so far: one per generated token on these engines, for usage when the stream dies. */
  get deltas(): number {
    return this.#deltas;
  }

  /** The usage the upstream reported (prompt, completion, cached, reasoning tokens), once seen. */
  get usage(): UsageCounts | undefined {
    const reported = this.#reported;
    if (reported === undefined) return undefined;
    const usage: UsageCounts = {
      promptTokens: reported.promptTokens,
      completionTokens: reported.completionTokens,
      cachedTokens: reported.cachedTokens ?? this.#timingsCached ?? 0,
    };
    if (reported.reasoningTokens !== undefined) usage.reasoningTokens = reported.reasoningTokens;
    return usage;
  }

  /** Feeds raw response text (split anywhere); returns the events it completes. Throws on an error frame. */
  push(text: string): GenerationEvent[] {
    const events: GenerationEvent[] = [];
    const buffer = this.#pending + text;
    let start = 0;
    for (let end = buffer.indexOf("\n"); end !== -1; end = buffer.indexOf("\n", start)) {
      const line = buffer.slice(start, end);
      start = end + 1;
      this.#line(line.endsWith("\r") ? line.slice(0, -1) : line, events);
    }
    this.#pending = buffer.slice(start);
    return events;
  }

  /** The stream ended: the remaining events. Throws UpstreamProtocolError if it ended without [DONE] or usage. */
  end(): GenerationEvent[] {
    const events: GenerationEvent[] = [];
    try {
      if (this.#pending !== "") this.#line(this.#pending.replace(/\r$/, ""), events);
      // A last event not followed by its blank line still counts.
      this.#line("", events);
    } catch (err) {
      // A chunk cut in half is what a stream that died looks like: say that.
      if (err instanceof UpstreamProtocolError && !this.#done) {
        throw new UpstreamProtocolError("the stream ended without [DONE] (cut inside a chunk)");
      }
      throw err;
    } finally {
      this.#pending = "";
    }
    if (!this.#done) throw new UpstreamProtocolError("the stream ended without [DONE]");
    if (!this.#usageEmitted) throw new UpstreamProtocolError("the stream ended without a usage chunk");
    return events;
  }

  #line(line: string, events: GenerationEvent[]): void {
    if (line === "") {
      if (this.#data.length > 0) this.#dispatch(this.#data.join("\n"), this.#eventName === "error", events);
      this.#data = [];
      this.#eventName = "";
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + (line[colon + 1] === " " ? 2 : 1));
    if (field === "data") this.#data.push(value);
    else if (field === "event") this.#eventName = value;
    // Older llama-server builds sent a stream's error as a non-standard `error: {...}` line.
    else if (field === "error") this.#dispatch(value, true, events);
    // id, retry and unknown fields carry nothing for us.
  }

  #dispatch(payload: string, isError: boolean, events: GenerationEvent[]): void {
    if (this.#done) return;
    if (payload === "[DONE]") {
      this.#finishStream(events);
      return;
    }
    let chunk: unknown;
    try {
      chunk = JSON.parse(payload);
    } catch {
      throw new UpstreamProtocolError(`a chunk is not JSON: ${payload.slice(0, 80)}`);
    }
    if (!isRecord(chunk)) throw new UpstreamProtocolError("a chunk is not a JSON object");
    if (isError || chunk.error !== undefined) {
      throw upstreamErrorFromFrame(isRecord(chunk.error) ? chunk : { error: chunk });
    }
    if (chunk.usage !== undefined && chunk.usage !== null) this.#reported = readUsage(chunk.usage);
    if (isRecord(chunk.timings) && isCount(chunk.timings.cache_n))
      this.#timingsCached = chunk.timings.cache_n;
    const choices = chunk.choices;
    if (choices === undefined || choices === null) return;
    if (!Array.isArray(choices)) throw new UpstreamProtocolError("a chunk's choices is not an array");
    for (const choice of choices) this.#choice(choice, events);
  }

  #choice(choice: unknown, events: GenerationEvent[]): void {
    if (!isRecord(choice)) throw new UpstreamProtocolError("a choice is not a JSON object");
    const index = choice.index ?? 0;
    const state = typeof index === "number" ? this.#choices[index] : undefined;
    if (typeof index !== "number" || state === undefined) {
      throw new UpstreamProtocolError(
        `choice index ${JSON.stringify(index)} is out of range (n = ${this.#choices.length})`,
      );
    }
    const logprobs = readLogprobs(choice.logprobs);
    if (isRecord(choice.delta)) this.#delta(index, state, choice.delta, logprobs, events);
    else state.logprobs.push(...logprobs);
    const reason = choice.finish_reason;
    if (typeof reason === "string" && reason !== "") {
      // A repeated finish (a stream that also closes every choice at its end) is the same fact said twice.
      if (state.finished) return;
      state.finished = true;
      this.#started = true;
      events.push({ type: "finish", choice: index, reason: finishReason(reason, state.nextCall > 0) });
    }
  }

  #delta(
    choice: number,
    state: ChoiceState,
    delta: Record<string, unknown>,
    logprobs: TokenLogprob[],
    events: GenerationEvent[],
  ): void {
    const count = () => {
      if (state.finished) throw new UpstreamProtocolError(`choice ${choice} continued after its finish`);
      this.#started = true;
      this.#deltas++;
    };
    const emit = (text: string, target?: Extract<GenerationEvent, { type: "delta" }>["target"]) => {
      count();
      events.push(
        target === undefined ? { type: "delta", choice, text } : { type: "delta", choice, text, target },
      );
    };
    // Some servers send both names with the same text: one of them is the reasoning.
    const reasoning = nonEmpty(delta.reasoning_content) ?? nonEmpty(delta.reasoning);
    if (reasoning !== undefined) {
      if (this.#relayReasoning) emit(reasoning, { kind: "reasoning" });
      else count();
    }
    const content = nonEmpty(delta.content);
    const calls = delta.tool_calls;
    const hasCalls = Array.isArray(calls) && calls.length > 0;
    if (content !== undefined) {
      emit(content);
      // A chunk's logprobs are of its content's tokens (OpenAI's form), with those held from text-less chunks.
      if (state.logprobs.length > 0 || logprobs.length > 0) {
        const event = events.at(-1) as Extract<GenerationEvent, { type: "delta" }>;
        event.logprobs = [...state.logprobs, ...logprobs];
        state.logprobs = [];
      }
    } else if (reasoning !== undefined || hasCalls) {
      // Tokens of reasoning or of a tool call are not content tokens: Hearth reports content tokens only.
      state.logprobs = [];
    } else {
      state.logprobs.push(...logprobs);
    }
    if (calls === undefined || calls === null) return;
    if (!Array.isArray(calls)) throw new UpstreamProtocolError("a delta's tool_calls is not an array");
    for (const call of calls) {
      if (!isRecord(call)) throw new UpstreamProtocolError("a tool call delta is not a JSON object");
      const fn = isRecord(call.function) ? call.function : {};
      const name = nonEmpty(fn.name);
      // Arguments are JSON text in OpenAI's form; an object (a server that parsed them) is written back as text.
      const args =
        typeof fn.arguments === "string"
          ? fn.arguments
          : isRecord(fn.arguments)
            ? JSON.stringify(fn.arguments)
            : "";
      let number =
        typeof call.index === "number"
          ? state.calls.get(call.index)
          : name === undefined
            ? state.lastCall
            : undefined;
      if (number === undefined) {
        // A fragment with only the call's id (llama-server may send it apart) says nothing yet.
        if (name === undefined && args === "") continue;
        if (name === undefined) {
          throw new UpstreamProtocolError(`choice ${choice} sent tool call arguments before the call's name`);
        }
        number = state.nextCall++;
        if (typeof call.index === "number") state.calls.set(call.index, number);
        // The name opens the call with empty text; arguments that came with it follow as their own fragment.
        emit("", { kind: "tool_call", call: number, name });
      }
      state.lastCall = number;
      if (args !== "") emit(args, { kind: "tool_call", call: number });
    }
  }

  #finishStream(events: GenerationEvent[]): void {
    this.#done = true;
    const open = this.#choices.findIndex((state) => !state.finished);
    if (open !== -1)
      throw new UpstreamProtocolError(`the stream ended without a finish_reason for choice ${open}`);
    const usage = this.usage;
    if (usage === undefined) return;
    this.#usageEmitted = true;
    events.push({ type: "usage", usage });
  }
}

/**
 * Upstream finish reasons → Hearth's. `function_call` is the legacy name of `tool_calls`. A choice that made tool
 * calls and then says `stop` (vLLM with a named tool_choice, older Ollama) finished by its calls. Every other
 * value — `content_filter`, vLLM/SGLang's `abort`, `eos`, unknown ones — ended the choice for a reason other than
 * its token budget, and Hearth's spec knows only stop/length/tool_calls: `stop`.
 */
function finishReason(reason: string, madeCalls: boolean): FinishReason {
  if (reason === "length") return "length";
  if (reason === "tool_calls" || reason === "function_call" || madeCalls) return "tool_calls";
  return "stop";
}

function readUsage(value: unknown): ReportedUsage {
  if (!isRecord(value) || !isCount(value.prompt_tokens) || !isCount(value.completion_tokens)) {
    throw new UpstreamProtocolError("the usage chunk lacks prompt_tokens or completion_tokens");
  }
  const prompt = isRecord(value.prompt_tokens_details)
    ? value.prompt_tokens_details.cached_tokens
    : undefined;
  const completion = isRecord(value.completion_tokens_details)
    ? value.completion_tokens_details.reasoning_tokens
    : undefined;
  return {
    promptTokens: value.prompt_tokens,
    completionTokens: value.completion_tokens,
    cachedTokens: isCount(prompt) ? prompt : undefined,
    reasoningTokens: isCount(completion) ? completion : undefined,
  };
}

/**
 * A choice's `logprobs` in any dialect, in OpenAI's shape: `content` entries with `token`, `logprob` and, where
 * the engine sends them, `bytes` and `top_logprobs` (llama-server adds an `id`, dropped). Missing bytes are the
 * token's UTF-8; a logprob that is not a finite number (an engine's -inf or null) is OpenAI's floor, -9999.
 */
function readLogprobs(value: unknown): TokenLogprob[] {
  if (!isRecord(value) || !Array.isArray(value.content)) return [];
  return value.content.filter(isRecord).map((entry) => {
    const top = Array.isArray(entry.top_logprobs) ? entry.top_logprobs.filter(isRecord) : [];
    return { ...readAlternative(entry), topLogprobs: top.map(readAlternative) };
  });
}

function readAlternative(entry: Record<string, unknown>): TokenAlternative {
  const token = typeof entry.token === "string" ? entry.token : "";
  const bytes =
    Array.isArray(entry.bytes) && entry.bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)
      ? (entry.bytes as number[])
      : [...new TextEncoder().encode(token)];
  const logprob =
    typeof entry.logprob === "number" && Number.isFinite(entry.logprob)
      ? Math.max(LOGPROB_FLOOR, Math.min(0, entry.logprob))
      : LOGPROB_FLOOR;
  return { token, logprob, bytes };
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}
