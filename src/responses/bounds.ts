// The bounds on what one Responses API request makes the store hold, as pure checks the endpoint runs before any
// work: each answer names the bound and reads as the 400's message (param `input`).
import type { ResponsesConfig } from "../config/responses-settings.js";

/** A request's input beyond a stored-response bound: the 400's message and param. */
export interface InputBoundExceeded {
  param: "input";
  bound: "maxInputItems" | "maxStoredBytes";
  message: string;
}

/**
 * Checks a request's `input` (a string or an array of items, as sent) against `responses.maxInputItems` and
 * `responses.maxStoredBytes`; undefined when it fits. The byte count is the UTF-8 length of its JSON.
 */
export function inputBoundExceeded(
  input: unknown,
  limits: Pick<ResponsesConfig, "maxInputItems" | "maxStoredBytes">,
): InputBoundExceeded | undefined {
  if (Array.isArray(input) && input.length > limits.maxInputItems) {
    return {
      param: "input",
      bound: "maxInputItems",
      message: `Invalid 'input': expected an array with at most ${limits.maxInputItems} element(s), but got ${input.length} instead.`,
    };
  }
  const bytes = Buffer.byteLength(JSON.stringify(input) ?? "", "utf8");
  if (bytes > limits.maxStoredBytes) {
    return {
      param: "input",
      bound: "maxStoredBytes",
      message: `Invalid 'input': its JSON is ${bytes} bytes; at most ${limits.maxStoredBytes} bytes are stored per response.`,
    };
  }
  return undefined;
}
