// The non-streamed chat completion: every choice's message (content, reasoning, tool calls), finish reason, usage.
import type { FinishReason, Generation, TokenLogprob, UsageCounts } from "../../engine/types.js";
import {
  type ChatCompletion,
  type CompletionMeta,
  type ResponseMessage,
  type ToolCall,
  toolCallId,
  toUsage,
  toWireLogprobs,
  wireFinishReason,
} from "./wire.js";

interface ChoiceAccumulator {
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  reason: FinishReason | null;
  logprobs: TokenLogprob[];
}

export interface BodyOptions {
  n: number;
  /** Reasoning was enabled: every message carries `reasoning` (empty when the model wrote none). */
  reasoning: boolean;
  /** The request asked for `logprobs`: every choice carries them (else `logprobs: null`). */
  logprobs: boolean;
  /** The request used the legacy `functions`: a call is `message.function_call`, finishing `function_call`. */
  legacyFunctions: boolean;
  /** Output that failed its post-generation check: the grammar should make this impossible, worth a log. */
  onInvalid: (invalid: string) => void;
}

export async function completionBody(
  generation: Generation,
  meta: CompletionMeta,
  options: BodyOptions,
): Promise<ChatCompletion> {
  const choices: ChoiceAccumulator[] = Array.from({ length: options.n }, () => ({
    content: "",
    reasoning: "",
    toolCalls: [],
    reason: null,
    logprobs: [],
  }));
  let usage: UsageCounts | undefined;
  for await (const event of generation.events) {
    if (event.type === "usage") {
      usage = event.usage;
      continue;
    }
    const choice = choices[event.choice] as ChoiceAccumulator;
    if (event.type === "finish") {
      choice.reason = event.reason;
      if (event.invalid !== undefined) options.onInvalid(event.invalid);
      continue;
    }
    const target = event.target;
    if (target === undefined) {
      choice.content += event.text;
      if (event.logprobs !== undefined) choice.logprobs.push(...event.logprobs);
    } else if (target.kind === "reasoning") choice.reasoning += event.text;
    else if (target.name !== undefined) {
      choice.toolCalls.push({
        id: toolCallId(),
        type: "function",
        function: { name: target.name, arguments: "" },
      });
    } else {
      const call = choice.toolCalls[target.call];
      if (call !== undefined) call.function.arguments += event.text;
    }
  }
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: choices.map((choice, index) => {
      const message = responseMessage(choice, options);
      return {
        index,
        message,
        logprobs: options.logprobs
          ? { content: message.content === null ? null : toWireLogprobs(choice.logprobs), refusal: null }
          : null,
        finish_reason: wireFinishReason(choice.reason ?? "stop", options.legacyFunctions),
      };
    }),
    usage: toUsage(usage ?? { promptTokens: generation.promptTokens, completionTokens: 0, cachedTokens: 0 }),
    system_fingerprint: null,
  };
}

function responseMessage(choice: ChoiceAccumulator, options: BodyOptions): ResponseMessage {
  const calls = choice.toolCalls.length > 0;
  const message: ResponseMessage = {
    role: "assistant",
    content: calls ? null : choice.content,
    refusal: null,
  };
  if (options.reasoning) message.reasoning = choice.reasoning;
  const [first] = choice.toolCalls;
  // The legacy API makes at most one call (its requests are rewritten with parallel_tool_calls false).
  if (options.legacyFunctions && first !== undefined) message.function_call = first.function;
  else if (calls) message.tool_calls = choice.toolCalls;
  return message;
}
