// How admin commands print what the server answered: timestamps, limits, model lists and aligned tables.
import type { KeyWire, OrgWire } from "../../http/admin/wire.js";
import type { UsageTotals } from "../../usage/queries.js";

/** An ISO timestamp to the second, with a space for the "T". */
export function day(iso: string): string {
  return iso.slice(0, 19).replace("T", " ");
}

export function limitText(value: number | null): string {
  return value === null ? "unlimited" : String(value);
}

export function limitsText(org: OrgWire): string {
  return `rpm ${limitText(org.rpm)}, tpm ${limitText(org.tpm)}`;
}

export function modelList(models: readonly string[]): string {
  return models.length === 0 ? "(none)" : models.join(", ");
}

export function keyStatus(key: KeyWire): string {
  if (key.revoked_at !== null) return "revoked";
  if (key.expires_at !== null && Date.parse(key.expires_at) <= Date.now()) return "expired";
  return "active";
}

export function usageCells(t: UsageTotals): string[] {
  return [
    t.requests,
    t.prompt_tokens,
    t.completion_tokens,
    t.reasoning_tokens,
    t.cached_tokens,
    t.total_tokens,
    t.aborted,
    t.errors,
  ].map(String);
}

/** Columns padded to their widest cell, two spaces apart; the last column is not padded. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)];
}
