// Operator-written amounts: durations (Ollama's keep_alive, key expiry) and memory sizes ("8GiB"), parsed once.

// The one duration grammar of Hearth (config `keepAlive`, `hearth models add --keep-alive`, `hearth keys create
// --expires-in`): the union of the two grammars it replaced, so every input either accepted still is
// (docs/decisions.md, "One duration grammar").
const DURATION_UNITS_MS: Readonly<Record<string, number>> = Object.freeze({
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
});

const PLAIN_SECONDS = /^(-?)(\d+(?:\.\d+)?)$/;
const WITH_UNITS = /^(-?)((?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+)$/;
const TERM = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;

/**
 * Milliseconds (rounded, signed) from a duration: a plain number of seconds ("120", "1.5", "-1") or one or more
 * amounts with units `ms`, `s`, `m`, `h`, `d` ("500ms", "30s", "1h30m", "1.5h", "30d"), with at most one leading
 * "-" for the whole; blanks around it are ignored. Undefined for anything else, or beyond a safe integer.
 * Whether a negative, zero or sub-second duration makes sense is each caller's rule.
 */
export function parseDurationMs(text: string): number | undefined {
  const trimmed = text.trim();
  const plain = PLAIN_SECONDS.exec(trimmed);
  const match = plain ?? WITH_UNITS.exec(trimmed);
  if (match === null) return undefined;
  let ms = 0;
  if (plain !== null) ms = Number(plain[2]) * 1000;
  else {
    for (const [, amount, unit] of (match[2] ?? "").matchAll(TERM)) {
      ms += Number(amount) * (DURATION_UNITS_MS[unit ?? ""] ?? Number.NaN);
    }
  }
  // Rounded after summing: "0.1m" is 6000 ms although 0.1 × 60000 is not exactly 6000 in floating point.
  const rounded = Math.round(ms);
  if (!Number.isSafeInteger(rounded)) return undefined;
  return match[1] === "-" ? -rounded : rounded;
}

/**
 * Ollama's `keep_alive`: a number of seconds or a duration (`parseDurationMs`); negative: forever (null); 0: unload
 * as soon as the model is idle. Undefined when `value` is neither.
 */
export function parseKeepAlive(value: number | string): number | null | undefined {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return undefined;
    return value < 0 ? null : Math.round(value * 1000);
  }
  const ms = parseDurationMs(value);
  if (ms === undefined) return undefined;
  // As in Ollama (Go's ParseDuration), "-0s" is zero, not negative: unload when idle.
  return ms < 0 ? null : Math.abs(ms);
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
