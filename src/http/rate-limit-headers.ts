// The x-ratelimit-* response headers and the durations in them, written the way OpenAI writes them.
import type { RateSnapshot, WindowState } from "../limits/types.js";

/** The six x-ratelimit-* headers, only for the windows that exist (an unlimited window has none). */
export function rateLimitHeaders(snapshot: RateSnapshot): Record<string, string> {
  return { ...windowHeaders("requests", snapshot.requests), ...windowHeaders("tokens", snapshot.tokens) };
}

function windowHeaders(kind: "requests" | "tokens", state: WindowState | undefined): Record<string, string> {
  if (state === undefined) return {};
  return {
    [`x-ratelimit-limit-${kind}`]: String(state.limit),
    [`x-ratelimit-remaining-${kind}`]: String(state.remaining),
    [`x-ratelimit-reset-${kind}`]: formatDuration(state.resetMs),
  };
}

/**
 * A duration as OpenAI prints it in x-ratelimit-reset-* and in "Please try again in …" (Go's Duration format at
 * millisecond precision): `120ms`, `1s`, `8.64s`, `1m30s`, `6m0s`, `1h0m0s`; `0s` for nothing left.
 */
export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.ceil(ms));
  if (total === 0) return "0s";
  if (total < 1000) return `${total}ms`;
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const millis = total % 60_000;
  const whole = Math.floor(millis / 1000);
  const fraction = millis % 1000;
  const seconds =
    fraction === 0 ? `${whole}` : `${whole}.${String(fraction).padStart(3, "0").replace(/0+$/, "")}`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}s`;
  if (minutes > 0) return `${minutes}m${seconds}s`;
  return `${seconds}s`;
}
