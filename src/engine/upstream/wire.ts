// The wire to upstream chat-completion engines: the body Hearth sends each dialect, their errors, their model lists.
import type { SamplingExtension } from "../../config/sampling-defaults.js";
import type { UpstreamKindSetting } from "../../config/schema.js";
import { scopedCacheKey } from "../cache-scope.js";
import type {
  ChatMessage,
  GenerationRequest,
  OutputRequest,
  ReasoningEffort,
  SamplingParams,
  ToolChoice,
} from "../types.js";
import { isRecord } from "./upstream-error.js";

export { UpstreamStreamDecoder, type UpstreamStreamDecoderOptions } from "./stream-decoder.js";
export {
  UpstreamError,
  UpstreamProtocolError,
  upstreamErrorFromFrame,
  upstreamErrorFromResponse,
} from "./upstream-error.js";

/** An engine dialect, once known (`auto` is resolved from the endpoint's `/v1/models`). */
export type UpstreamKind = Exclude<UpstreamKindSetting, "auto">;

/** What a dialect accepts beyond OpenAI's own fields (a Hearth worker refuses any field it does not know). */
export interface KindTraits {
  /** `chat_template_kwargs` (enable_thinking): vLLM, SGLang, llama-server (`--jinja`), Hearth. */
  templateKwargs: boolean;
  /** `cache_salt` isolates the prefix cache per salt: vLLM's documented field; Hearth accepts it as vLLM does. */
  cacheSalt: boolean;
  /** `ignore_eos` (benchmarks): vLLM, SGLang and llama-server take it as an extra sampling field. */
  ignoreEos: boolean;
  /** Generates `n` > 1 choices (Ollama's OpenAI layer ignores `n` and answers one). */
  multipleChoices: boolean;
  /**
   * vLLM's sampling extensions (top_k, min_p, repetition_penalty) by the names the engine takes; none: it takes
   * none of them, and a request that sets one is refused (400) before it is sent.
   */
  sampling?: SamplingWireNames;
}

/** Where an engine takes vLLM's sampling extensions in its request body. */
export interface SamplingWireNames {
  /** llama-server's `repeat_penalty` (applied over its `repeat_last_n` window: the request's `penaltyWindow`). */
  repetitionPenalty: "repetition_penalty" | "repeat_penalty";
}

/** vLLM's names (SGLang's and a Hearth worker's too). */
const VLLM_SAMPLING: SamplingWireNames = Object.freeze({ repetitionPenalty: "repetition_penalty" });

export const KIND_TRAITS: Readonly<Record<UpstreamKind, Readonly<KindTraits>>> = Object.freeze({
  vllm: Object.freeze({
    templateKwargs: true,
    cacheSalt: true,
    ignoreEos: true,
    multipleChoices: true,
    sampling: VLLM_SAMPLING,
  }),
  // SGLang documents no per-tenant cache salt: its radix cache is shared, so routing keeps organizations apart.
  sglang: Object.freeze({
    templateKwargs: true,
    cacheSalt: false,
    ignoreEos: true,
    multipleChoices: true,
    sampling: VLLM_SAMPLING,
  }),
  "llama-server": Object.freeze({
    templateKwargs: true,
    cacheSalt: false,
    ignoreEos: true,
    multipleChoices: true,
    sampling: Object.freeze({ repetitionPenalty: "repeat_penalty" }),
  }),
  ollama: Object.freeze({
    templateKwargs: false,
    cacheSalt: false,
    ignoreEos: false,
    multipleChoices: false,
  }),
  hearth: Object.freeze({
    templateKwargs: true,
    cacheSalt: true,
    ignoreEos: false,
    multipleChoices: true,
    sampling: VLLM_SAMPLING,
  }),
  openai: Object.freeze({ templateKwargs: false, cacheSalt: false, ignoreEos: false, multipleChoices: true }),
});

/**
 * The dialects that take OpenAI's `tool_choice: {type: "allowed_tools"}`; the others get only the allowed tools.
 * (vLLM, SGLang, llama-server and Ollama document no such form.)
 */
const ALLOWED_TOOLS_KINDS: ReadonlySet<UpstreamKind> = new Set<UpstreamKind>(["openai", "hearth"]);

export interface UpstreamRequestBodyOptions {
  /** The name the endpoint serves. */
  model: string;
  kind: UpstreamKind;
  /** The organization's prefix-cache scope, sent where the engine isolates its cache by salt. */
  cacheSalt: string;
  /**
   * The prompt's and the output's tokens together at most (prompt count + max_tokens): llama-server's penalty
   * window (`repeat_last_n`), so its repeat penalty covers the whole prompt and output as vLLM's does.
   */
  penaltyWindow?: number;
}

/**
 * The body Hearth sends upstream for one request: always streamed with usage (so usage is exact), every validated
 * field forwarded, and only the fields `kind` accepts.
 */
export function upstreamRequestBody(
  request: GenerationRequest,
  options: UpstreamRequestBodyOptions,
): Record<string, unknown> {
  const traits = KIND_TRAITS[options.kind];
  const { sampling } = request;
  const body: Record<string, unknown> = {
    model: options.model,
    messages: request.messages.map(wireMessage),
    stream: true,
    stream_options: { include_usage: true },
    temperature: sampling.temperature,
    top_p: sampling.topP,
    frequency_penalty: sampling.frequencyPenalty,
    presence_penalty: sampling.presencePenalty,
    seed: sampling.seed,
  };
  // n = 1 is every engine's default; leaving it out keeps engines without `n` (Ollama) on their one path.
  if (request.n !== 1) body.n = request.n;
  // `max_tokens`, not `max_completion_tokens`: every dialect here accepts it (OpenAI still does for chat models).
  if (sampling.maxTokens !== undefined) body.max_tokens = sampling.maxTokens;
  if (sampling.stop.length > 0) body.stop = sampling.stop;
  if (sampling.ignoreEos === true && traits.ignoreEos) body.ignore_eos = true;
  // Only when asked: a Hearth worker refuses nothing here, but older engines may refuse fields they do not know.
  if (sampling.logprobs !== undefined) {
    body.logprobs = true;
    body.top_logprobs = sampling.logprobs;
  }
  // Token ids of the upstream's own vocabulary: the upstream judges them (its 400 is relayed).
  if (sampling.logitBias !== undefined) body.logit_bias = Object.fromEntries(sampling.logitBias);
  if (traits.sampling !== undefined) {
    Object.assign(body, samplingExtensionFields(sampling, traits.sampling, options.penaltyWindow));
  }
  // Sent when false too: some templates (Qwen3) think unless told not to, and Hearth's default is off.
  Object.assign(body, thinkingFields(request, options.kind));
  if (traits.cacheSalt && options.cacheSalt !== "") body.cache_salt = options.cacheSalt;
  // OpenAI's own field, which every dialect accepts (vLLM and SGLang take it, llama-server and Ollama ignore it);
  // a Hearth worker records it with its usage. As the client sent it: the organization stays with the gateway.
  if (request.user !== undefined && request.user !== "") body.user = request.user;
  // OpenAI's own cache routing and a Hearth worker's slot affinity: the key scoped to the organization and hashed,
  // so one organization's key never meets another's upstream and the upstream never learns organization ids.
  const cacheKey = scopedCacheKey(request);
  if (cacheKey !== undefined && (options.kind === "openai" || options.kind === "hearth")) {
    body.prompt_cache_key = cacheKey;
  }
  if (request.output !== undefined) Object.assign(body, outputFields(request.output, options.kind));
  return body;
}

/**
 * The vLLM sampling extensions the request (or its model's defaults) set, by the engine's names; the ones left out
 * are not sent (the engine applies its own default). No top-k travels as −1, which every such engine reads as off.
 */
function samplingExtensionFields(
  sampling: SamplingParams,
  names: SamplingWireNames,
  penaltyWindow: number | undefined,
): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (sampling.topK !== undefined) fields.top_k = sampling.topK === 0 ? -1 : sampling.topK;
  if (sampling.minP !== undefined) fields.min_p = sampling.minP;
  if (sampling.repetitionPenalty !== undefined) {
    fields[names.repetitionPenalty] = sampling.repetitionPenalty;
    // llama-server penalises the last 64 tokens of prompt and output by default, vLLM all of them. Its window is a
    // ring buffer allocated at that size (and −1 is refused): it is sent as long as the request can get.
    if (names.repetitionPenalty === "repeat_penalty" && penaltyWindow !== undefined) {
      fields.repeat_last_n = penaltyWindow;
    }
  }
  return fields;
}

/** The first of vLLM's sampling extensions `sampling` sets (by its request name), if any. */
export function samplingExtensionSet(sampling: SamplingParams): SamplingExtension | undefined {
  if (sampling.topK !== undefined) return "top_k";
  if (sampling.minP !== undefined) return "min_p";
  if (sampling.repetitionPenalty !== undefined) return "repetition_penalty";
  return undefined;
}

function wireMessage(message: ChatMessage): Record<string, unknown> {
  const out: Record<string, unknown> = { role: message.role };
  const calls = message.toolCalls ?? [];
  // OpenAI's form of an assistant turn that only called tools: content null beside the calls.
  out.content =
    message.role === "assistant" && calls.length > 0 && message.content === "" ? null : message.content;
  // A tool message has no `name` in OpenAI's schema (and a Hearth worker refuses one there).
  if (message.name !== undefined && message.role !== "tool") out.name = message.name;
  if (message.role === "tool" && message.toolCallId !== undefined) out.tool_call_id = message.toolCallId;
  if (message.role === "assistant" && calls.length > 0) {
    out.tool_calls = calls.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: call.arguments },
    }));
  }
  return out;
}

/** response_format with the raw schema the client sent; tools only when there are some (else they are refused). */
function outputFields(output: OutputRequest, kind: UpstreamKind): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  const { format } = output;
  if (format.type === "json_object") fields.response_format = { type: "json_object" };
  if (format.type === "json_schema") {
    fields.response_format = {
      type: "json_schema",
      json_schema: { name: format.name, schema: format.schema },
    };
  }
  if (output.tools.length > 0) {
    const choice = output.toolChoice;
    // An engine without allowed_tools gets only the allowed ones, with the mode as its tool_choice: the same calls
    // are possible, but its prompt lists fewer tools than the client sent (so its prefix cache differs per set).
    const narrowed = typeof choice === "object" && "allowed" in choice && !ALLOWED_TOOLS_KINDS.has(kind);
    const tools = narrowed ? output.tools.filter((tool) => choice.allowed.includes(tool.name)) : output.tools;
    fields.tools = tools.map((tool) => {
      const fn: Record<string, unknown> = { name: tool.name };
      if (tool.description !== undefined) fn.description = tool.description;
      if (tool.parameters !== undefined) fn.parameters = tool.parameters;
      return { type: "function", function: fn };
    });
    fields.tool_choice = narrowed ? choice.mode : wireToolChoice(choice);
    fields.parallel_tool_calls = output.parallelToolCalls;
  }
  return fields;
}

function wireToolChoice(choice: ToolChoice): unknown {
  if (typeof choice === "string") return choice;
  if ("name" in choice) return { type: "function", function: { name: choice.name } };
  const tools = choice.allowed.map((name) => ({ type: "function", function: { name } }));
  return { type: "allowed_tools", allowed_tools: { mode: choice.mode, tools } };
}

/** The `reasoning_effort` values vLLM's and SGLang's request schemas take (on/off travels in the template kwargs). */
const THREE_EFFORTS: readonly ReasoningEffort[] = ["low", "medium", "high"];

/**
 * The thinking switch in each dialect. `enable_thinking` is sent when false too: some templates (Qwen3) think
 * unless told not to, and Hearth's default is off. `reasoning_effort`, when the client sent one: as it came to
 * OpenAI and Hearth; in vLLM's and SGLang's own field when it is a value they take; to the templates of engines that
 * render with kwargs (a template that sizes its reasoning by it reads it); to Ollama in the four values it takes.
 */
function thinkingFields(request: GenerationRequest, kind: UpstreamKind): Record<string, unknown> {
  const effort = request.reasoningEffort;
  const fields: Record<string, unknown> = {};
  if (KIND_TRAITS[kind].templateKwargs) {
    fields.chat_template_kwargs =
      effort === undefined || kind === "hearth"
        ? { enable_thinking: request.enableThinking }
        : { enable_thinking: request.enableThinking, reasoning_effort: effort };
  }
  if (effort === undefined) return fields;
  if (kind === "openai" || kind === "hearth") fields.reasoning_effort = effort;
  if ((kind === "vllm" || kind === "sglang") && THREE_EFFORTS.includes(effort))
    fields.reasoning_effort = effort;
  if (kind === "ollama") fields.reasoning_effort = request.enableThinking ? ollamaEffort(effort) : "none";
  return fields;
}

function ollamaEffort(effort: ReasoningEffort): string {
  return effort === "xhigh" || effort === "max" ? "high" : effort;
}

export interface ModelsInfo {
  /** The endpoint serves `model` (its id or one of its aliases). */
  present: boolean;
  /** Tokens per sequence, when the endpoint says. */
  contextSize: number | undefined;
  /** The dialect, as far as the list tells it; undefined when the body is not a model list. */
  kind: UpstreamKind | undefined;
}

/**
 * What an endpoint serves, from its GET /v1/models body. The kind comes from `owned_by` (vLLM "vllm", SGLang
 * "sglang", llama-server "llamacpp", Hearth "hearth", Ollama "library" or a namespace with a `name:tag` id); any
 * other list is plain OpenAI, the dialect that sends no extra field. The context size: vLLM/SGLang
 * `max_model_len`, Hearth `context_length`, llama-server `meta.n_ctx` (a slot's context), else `meta.n_ctx_train`
 * (older builds; the model's trained length, an upper bound the config's `contextSize` should narrow).
 */
export function readModelsResponse(body: unknown, model: string): ModelsInfo {
  const data = isRecord(body) && Array.isArray(body.data) ? body.data.filter(isRecord) : undefined;
  if (data === undefined) return { present: false, contextSize: undefined, kind: undefined };
  const entry = data.find(
    (item) => item.id === model || (Array.isArray(item.aliases) && item.aliases.includes(model)),
  );
  const described = entry ?? data[0];
  return {
    present: entry !== undefined,
    contextSize: entry === undefined ? undefined : contextSizeOf(entry),
    kind: described === undefined ? undefined : kindOf(described),
  };
}

function kindOf(entry: Record<string, unknown>): UpstreamKind {
  const owner = typeof entry.owned_by === "string" ? entry.owned_by.toLowerCase() : "";
  if (owner === "vllm") return "vllm";
  if (owner === "sglang") return "sglang";
  if (owner === "llamacpp" || (isRecord(entry.meta) && "n_ctx_train" in entry.meta)) return "llama-server";
  if (owner === "hearth") return "hearth";
  if (owner === "ollama" || owner === "library") return "ollama";
  if (
    typeof entry.id === "string" &&
    /^[^\s:]+:[\w.-]+$/.test(entry.id) &&
    owner !== "openai" &&
    owner !== "system"
  ) {
    return "ollama";
  }
  return "openai";
}

function contextSizeOf(entry: Record<string, unknown>): number | undefined {
  const meta = isRecord(entry.meta) ? entry.meta : {};
  for (const value of [entry.max_model_len, entry.context_length, meta.n_ctx, meta.n_ctx_train]) {
    if (typeof value === "number" && Number.isInteger(value) && value > 0) return value;
  }
  return undefined;
}
