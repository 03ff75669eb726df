// The usage meter port: one record per admitted completion (chat completions or responses), buffered, never lost on a clean stop.

export type UsageStatus = "completed" | "aborted" | "error";

/** The API endpoints a usage record can name (frozen registry; the column's check constraint lists the same). */
export const USAGE_ENDPOINTS = Object.freeze(["chat.completions", "responses"] as const);
export type UsageEndpoint = (typeof USAGE_ENDPOINTS)[number];

export interface UsageRecord {
  /** When the request ended. */
  at: Date;
  orgId: string;
  keyId: string;
  model: string;
  requestId: string;
  promptTokens: number;
  /** Every generated token, reasoning included. */
  completionTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  status: UsageStatus;
  latencyMs: number;
  /** The request's `user`, the caller's id for its end user (absent or empty: none). */
  user?: string | undefined;
  /** The endpoint the request came through; absent: `chat.completions` (records made before there were two). */
  endpoint?: UsageEndpoint | undefined;
}

export interface UsageMeter {
  /** Buffers the record; it is written within the flush interval (or by flush/dispose). Never throws. */
  record(record: UsageRecord): void;
  /** Writes every buffered record now. */
  flush(): Promise<void>;
  /** Flushes and stops the timer; records after this are written at once. */
  dispose(): Promise<void>;
}
