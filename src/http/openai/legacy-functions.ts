// OpenAI's deprecated `functions` / `function_call` (still in the SDKs' types): rewritten onto tools before validation.
import { InvalidRequestError } from "../errors/api-error.js";

/**
 * The call id given to an assistant message's legacy `function_call` (which has none): the message's index makes it
 * unique, and the `function` message that answers it gets the same id.
 */
const legacyCallId = (messageIndex: number) => `call_function_${messageIndex}`;

/**
 * A request body with the legacy fields as their successors: `functions` → `tools`, `function_call` → `tool_choice`
 * (one call at most, as the legacy API makes), an assistant message's `function_call` → `tool_calls`, and a
 * `function` message → a `tool` message answering it. `legacy` is true when the request used `functions`: its reply
 * then takes the legacy shape too (`message.function_call`, `finish_reason: "function_call"`). The result goes
 * through the same validation as any request; `legacyParam` names a rewritten field's place as the client sent it.
 */
export function rewriteLegacyFunctions(body: Record<string, unknown>): {
  body: Record<string, unknown>;
  legacy: boolean;
} {
  const out: Record<string, unknown> = { ...body };
  const functions = present(body.functions);
  const functionCall = present(body.function_call);
  delete out.functions;
  delete out.function_call;
  if (functions !== undefined) {
    if (present(body.tools) !== undefined) {
      throw new InvalidRequestError("Use either 'functions' (deprecated) or 'tools', not both.", "functions");
    }
    if (!Array.isArray(functions)) {
      throw new InvalidRequestError(
        "Invalid type for 'functions': expected an array of functions.",
        "functions",
      );
    }
    out.tools = functions.map((fn) => ({ type: "function", function: fn }));
    // The legacy API calls one function per reply.
    out.parallel_tool_calls = false;
  }
  if (functionCall !== undefined) {
    if (functions === undefined) {
      throw new InvalidRequestError(
        "Invalid value for 'function_call': 'function_call' is only allowed when 'functions' are specified.",
        "function_call",
      );
    }
    if (present(body.tool_choice) !== undefined) {
      throw new InvalidRequestError(
        "Use either 'function_call' or 'tool_choice', not both.",
        "function_call",
      );
    }
    out.tool_choice =
      typeof functionCall === "object" && !Array.isArray(functionCall)
        ? { type: "function", function: functionCall }
        : functionCall;
  }
  if (Array.isArray(body.messages)) out.messages = rewriteMessages(body.messages);
  return { body: out, legacy: functions !== undefined };
}

function rewriteMessages(messages: readonly unknown[]): unknown[] {
  let lastCall: string | undefined;
  return messages.map((message, i) => {
    if (!isRecord(message)) return message;
    const call = present(message.function_call);
    if (message.role === "assistant" && isRecord(call)) {
      if (present(message.tool_calls) !== undefined) {
        throw new InvalidRequestError(
          `Use either 'function_call' or 'tool_calls' in messages[${i}], not both.`,
          `messages[${i}].function_call`,
        );
      }
      lastCall = legacyCallId(i);
      const { function_call: _, ...rest } = message;
      return { ...rest, tool_calls: [{ id: lastCall, type: "function", function: call }] };
    }
    // One that answers no legacy call is left as it is: validation refuses the role, listing the roles there are.
    if (message.role === "function" && lastCall !== undefined) {
      const { role: _, ...rest } = message;
      return { ...rest, role: "tool", tool_call_id: lastCall };
    }
    return message;
  });
}

/**
 * A `param` of a rewritten request as the client sent it: `tools[i].function.x` → `functions[i].x`,
 * `tool_choice…` → `function_call…`.
 */
export function legacyParam(param: string): string {
  if (/^tools(\[|$)/.test(param)) return param.replace(/^tools(\[\d+\])?(\.function)?/, "functions$1");
  if (param.startsWith("tool_choice")) return param.replace(/^tool_choice(\.function)?/, "function_call");
  return param;
}

/** null means absent, as for every OpenAI field. */
function present(value: unknown): unknown {
  return value === null ? undefined : value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
