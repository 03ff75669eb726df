// Parsers for admin command options: a bad value is refused by commander before any request is sent.
import { InvalidArgumentError } from "commander";
import { parseDurationMs } from "../../config/durations.js";
import { USAGE_GROUP_BY, type UsageGroupBy } from "../../usage/queries.js";

export function positiveInteger(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n <= 0)
    throw new InvalidArgumentError("expected a positive whole number");
  return n;
}

/** A requests or tokens per minute limit; 0 means unlimited. */
export function limit(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError("expected a whole number, 0 for unlimited");
  return n;
}

export function groupBy(value: string): UsageGroupBy {
  const found = USAGE_GROUP_BY.find((g) => g === value);
  if (found === undefined) throw new InvalidArgumentError(`expected ${USAGE_GROUP_BY.join(", ")}`);
  return found;
}

export function role(value: string): string {
  if (value !== "owner" && value !== "member") throw new InvalidArgumentError('expected "owner" or "member"');
  return value;
}

export function commaList(value: string): string[] {
  return value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/**
 * `--expires-in`: a positive duration in the one grammar of `parseDurationMs` ("3600s", "90m", "12h", "30d",
 * "1h30m", or a plain number of seconds) → whole seconds, the unit of the admin API's `expires_in`.
 */
export function parseDuration(value: string): number {
  const ms = parseDurationMs(value);
  if (ms === undefined || ms <= 0 || ms % 1000 !== 0) {
    throw new InvalidArgumentError(
      "expected a positive duration in whole seconds such as 3600s, 90m, 12h or 30d",
    );
  }
  return ms / 1000;
}
