// Operator-written amounts: Ollama's keep_alive durations and memory sizes ("8GiB"), parsed once for the config.

const DURATION_UNITS_MS: Readonly<Record<string, number>> = Object.freeze({
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
});

/**
 * Ollama's `keep_alive`: a number of seconds or a Go duration ("30s", "5m", "1h30m", "500ms"); negative: forever
 * (null); 0: unload as soon as the model is idle. Undefined when `value` is neither.
 */
export function parseKeepAlive(value: number | string): number | null | undefined {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return undefined;
    return value < 0 ? null : Math.round(value * 1000);
  }
  const text = value.trim();
  if (/^-?\d+(\.\d+)?$/.test(text)) return parseKeepAlive(Number(text));
  const match = /^(-?)((?:\d+(?:\.\d+)?(?:ms|s|m|h))+)$/.exec(text);
  if (match === null) return undefined;
  let ms = 0;
  for (const [, amount, unit] of (match[2] ?? "").matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    ms += Number(amount) * (DURATION_UNITS_MS[unit ?? ""] ?? Number.NaN);
  }
  if (!Number.isFinite(ms)) return undefined;
  return match[1] === "-" ? null : Math.round(ms);
}

const SIZE_UNITS: Readonly<Record<string, number>> = Object.freeze({
  "": 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
});

/** Bytes from a number or "512MiB", "8GiB", "1.5GB" (case-insensitive); undefined when it is neither. */
export function parseByteSize(value: number | string): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) && value >= 0 ? Math.floor(value) : undefined;
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(value.trim());
  if (match === null) return undefined;
  const unit = SIZE_UNITS[(match[2] ?? "").toLowerCase()];
  return unit === undefined ? undefined : Math.floor(Number(match[1]) * unit);
}
