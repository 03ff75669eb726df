// Parsers for admin command options: a bad value is refused by commander before any request is sent.
import { InvalidArgumentError } from "commander";
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

const DURATION_UNITS: Readonly<Record<string, number>> = Object.freeze({ s: 1, m: 60, h: 3600, d: 86_400 });

/** "30d", "12h", "90m", "3600s" or a plain number of seconds → seconds. */
export function parseDuration(value: string): number {
  const match = /^(\d+)([smhd]?)$/.exec(value.trim());
  const unit = DURATION_UNITS[match?.[2] || "s"];
  const seconds = match === null || unit === undefined ? Number.NaN : Number(match[1]) * unit;
  if (!Number.isSafeInteger(seconds) || seconds <= 0) {
    throw new InvalidArgumentError("expected a positive duration such as 3600s, 90m, 12h or 30d");
  }
  return seconds;
}
