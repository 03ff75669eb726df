// A handled fault's cause for its one warn line: a code and a message, never a stack (docs/operations.md, "Log
// levels"). An error-level line, with the error and its stack, is for what Hearth itself did wrong.

export interface FaultCause {
  /** The system or library code (ECONNRESET, UND_ERR_SOCKET, 57P01), the error's own or its cause's. */
  code?: string;
  /** What happened, in words. */
  cause: string;
}

export function faultCause(err: unknown, cause?: string): FaultCause {
  const code = errorCode(err);
  const text = cause ?? (err instanceof Error ? err.message : String(err));
  return code === undefined ? { cause: text } : { code, cause: text };
}

/** The error's own system or library code, else its cause's (fetch wraps undici's socket errors so). */
export function errorCode(err: unknown): string | undefined {
  return codeOf(err) ?? (err instanceof Error ? codeOf(err.cause) : undefined);
}

function codeOf(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const code = (value as { code?: unknown }).code;
  return typeof code === "string" && code !== "" ? code : undefined;
}
