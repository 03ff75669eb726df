// What every /v1/chat/completions response must be, whatever was sent: an OpenAI-shaped error, or a whole 200
// (JSON with choices, or a stream ending in [DONE]). Used by the fuzz bench phase and its integration test.

/** Whether a body is OpenAI's error shape: `{"error":{"message","type","param","code"}}` with the right types. */
export function isOpenAiError(body: unknown): boolean {
  if (typeof body !== "object" || body === null) return false;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== "object" || error === null) return false;
  const { message, type, param, code } = error as Record<string, unknown>;
  return (
    typeof message === "string" &&
    message !== "" &&
    typeof type === "string" &&
    (param === null || typeof param === "string") &&
    (code === null || typeof code === "string") &&
    "param" in error &&
    "code" in error
  );
}

export interface ResponseCheck {
  status: number;
  /** What is wrong with the response, if anything (an error body not OpenAI-shaped, a broken stream). */
  problem?: string;
  /** A 200 stream that carried an error event (the generation failed after admission). */
  streamError?: boolean;
  /** prompt_tokens of a 200 with usage. */
  promptTokens?: number;
}

/** Checks one response's body against the contract: error bodies OpenAI-shaped, 200s whole (streams to [DONE]). */
export function checkResponse(status: number, contentType: string, text: string): ResponseCheck {
  if (status !== 200) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return { status, problem: `error body is not JSON: ${text.slice(0, 120)}` };
    }
    return isOpenAiError(json)
      ? { status }
      : { status, problem: `error body not OpenAI-shaped: ${text.slice(0, 200)}` };
  }
  if (!contentType.includes("text/event-stream")) {
    try {
      const json = JSON.parse(text) as { choices?: unknown[]; usage?: { prompt_tokens?: number } };
      if (!Array.isArray(json.choices)) return { status, problem: "200 without choices" };
      return json.usage?.prompt_tokens === undefined
        ? { status }
        : { status, promptTokens: json.usage.prompt_tokens };
    } catch {
      return { status, problem: "200 body is not JSON" };
    }
  }
  let done = false;
  let streamError = false;
  let promptTokens: number | undefined;
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (data === "[DONE]") {
      done = true;
      continue;
    }
    let json: { error?: unknown; usage?: { prompt_tokens?: number } | null };
    try {
      json = JSON.parse(data);
    } catch {
      return { status, problem: `stream event is not JSON: ${data.slice(0, 120)}` };
    }
    if (json.error !== undefined) {
      streamError = true;
      if (!isOpenAiError(json))
        return { status, problem: `stream error not OpenAI-shaped: ${data.slice(0, 200)}` };
    }
    if (typeof json.usage?.prompt_tokens === "number") promptTokens = json.usage.prompt_tokens;
  }
  if (!done) return { status, problem: "stream ended without [DONE]", streamError };
  const result: ResponseCheck = { status, streamError };
  if (promptTokens !== undefined) result.promptTokens = promptTokens;
  return result;
}
