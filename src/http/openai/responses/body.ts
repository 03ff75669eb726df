// The Responses API's response object: status, output items, usage, and every request field echoed with OpenAI's
// defaults; the non-streamed reply reads a whole generation into it.
import type { Generation, UsageCounts } from "../../../engine/types.js";
import type { ErrorCode } from "../../errors/error-codes.js";
import type { OutputItem } from "./output.js";
import { ResponseOutput } from "./output.js";
import type { ResponsesRequestBody } from "./request.js";

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  /** Includes reasoning tokens. */
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** What the response object says beyond the request's echo. */
export interface ResponseMeta {
  /** `resp_…` */
  id: string;
  /** Unix seconds. */
  createdAt: number;
  model: string;
  /** What `store` ends up as: false when not asked, or when saving failed. */
  store: boolean;
  /** The model's sampling defaults, echoed where the request left temperature or top_p out. */
  temperature: number;
  topP: number;
}

export interface ResponseState {
  status: ResponseStatus;
  output: OutputItem[];
  usage: UsageCounts | undefined;
  /** With status failed: why (OpenAI's `error` of a response). */
  error?: { code: ErrorCode | "server_error"; message: string };
}

export type ResponseObject = ReturnType<typeof responseObject>;

/** The response object at one state; the same shape in the body, in every lifecycle event, and in the store. */
export function responseObject(body: ResponsesRequestBody, meta: ResponseMeta, state: ResponseState) {
  const done = state.status === "completed" || state.status === "incomplete";
  return {
    id: meta.id,
    object: "response" as const,
    created_at: meta.createdAt,
    status: state.status,
    completed_at: state.status === "completed" ? Math.floor(Date.now() / 1000) : null,
    background: false,
    error: state.error ?? null,
    incomplete_details: state.status === "incomplete" ? { reason: "max_output_tokens" as const } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: typeof body.max_output_tokens === "number" ? body.max_output_tokens : null,
    max_tool_calls: body.max_tool_calls ?? null,
    model: meta.model,
    output: state.output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    prompt_cache_key: body.prompt_cache_key ?? null,
    prompt_cache_retention: body.prompt_cache_retention ?? null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    safety_identifier: body.safety_identifier ?? null,
    // Hearth has one tier: what OpenAI reports for `auto`.
    service_tier:
      body.service_tier === undefined || body.service_tier === "auto" ? "default" : body.service_tier,
    store: meta.store,
    temperature: typeof body.temperature === "number" ? body.temperature : meta.temperature,
    text: {
      format: body.text?.format ?? { type: "text" },
      verbosity: body.text?.verbosity ?? "medium",
    },
    tool_choice: body.tool_choice ?? "auto",
    tools: (body.tools ?? []).map((tool) => ({
      type: tool.type,
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
      strict: tool.strict ?? null,
    })),
    top_logprobs: body.top_logprobs ?? 0,
    top_p: typeof body.top_p === "number" ? body.top_p : meta.topP,
    truncation: body.truncation ?? "disabled",
    usage: done && state.usage !== undefined ? responseUsage(state.usage) : null,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
    presence_penalty: 0,
    frequency_penalty: 0,
  };
}

export function responseUsage(counts: UsageCounts): ResponseUsage {
  return {
    input_tokens: counts.promptTokens,
    input_tokens_details: { cached_tokens: counts.cachedTokens },
    output_tokens: counts.completionTokens,
    output_tokens_details: { reasoning_tokens: counts.reasoningTokens ?? 0 },
    total_tokens: counts.promptTokens + counts.completionTokens,
  };
}

/** Reads the whole generation; a failure propagates (the route answers it as chat does: an error status). */
export async function collectOutput(
  generation: Generation,
  responseId: string,
  onInvalid: (invalid: string) => void,
): Promise<ResponseOutput> {
  const output = new ResponseOutput(responseId);
  for await (const event of generation.events) {
    if (event.type === "finish" && event.invalid !== undefined) onInvalid(event.invalid);
    output.apply(event);
  }
  output.finish();
  output.usage ??= { promptTokens: generation.promptTokens, completionTokens: 0, cachedTokens: 0 };
  return output;
}

/** The final status of a finished generation: cut at its token budget → incomplete. */
export function finalStatus(output: ResponseOutput): "completed" | "incomplete" {
  return output.reason === "length" ? "incomplete" : "completed";
}
