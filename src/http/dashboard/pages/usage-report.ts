// Usage periods (presets and UTC dates, refused in words) and the usage report of one period, composed from
// UsageQueries.summary: what pages/usage.tsx shows. No HTTP, no markup.
import type { UsageGroup, UsageQueries, UsageTotals } from "../../../usage/queries.js";
import { formatDate } from "../layout.js";

/** What the page reads usage from (UsageQueries in the server). */
export type UsageSource = Pick<UsageQueries, "summary">;

const DAY_MS = 86_400_000;
/** Longest span of dates one page shows (one bar a day). */
export const MAX_PERIOD_DAYS = 366;

export const USAGE_PERIODS = Object.freeze([
  { id: "24h", label: "Last 24 hours", ms: DAY_MS },
  { id: "7d", label: "Last 7 days", ms: 7 * DAY_MS },
  { id: "30d", label: "Last 30 days", ms: 30 * DAY_MS },
  { id: "dates", label: "Between dates", ms: undefined },
] as const);
export type UsagePeriodId = (typeof USAGE_PERIODS)[number]["id"];
export const DEFAULT_PERIOD: UsagePeriodId = "7d";

/** A period resolved to instants: records with since <= at < until (until absent: up to now). */
export interface UsagePeriod {
  id: UsagePeriodId;
  since: Date;
  until: Date | undefined;
  /** The UTC days the chart shows, `YYYY-MM-DD`, oldest first. */
  days: string[];
  /** The form's date fields as given (or as the period implies). */
  sinceDate: string;
  untilDate: string;
  /** "from 2031-05-01 00:00 UTC to now" */
  description: string;
}

export type PeriodParse =
  | { ok: true; period: UsagePeriod }
  | { ok: false; message: string; form: PeriodForm };
export interface PeriodForm {
  period: string;
  since: string;
  until: string;
}

/** Reads `period`, `since` and `until` (UTC dates, both inclusive) from a query; errors are sentences. */
export function parseUsagePeriod(
  query: { [K in keyof PeriodForm]?: string | undefined },
  now: number,
): PeriodParse {
  const since = query.since?.trim() ?? "";
  const until = query.until?.trim() ?? "";
  const form = { period: query.period ?? "", since, until };
  const requested = query.period || (since !== "" || until !== "" ? "dates" : DEFAULT_PERIOD);
  const preset = USAGE_PERIODS.find((p) => p.id === requested);
  if (preset === undefined) {
    const known = USAGE_PERIODS.map((p) => `"${p.label}"`).join(", ");
    return { ok: false, message: `Unknown period "${requested}": choose one of ${known}.`, form };
  }
  if (preset.ms !== undefined) {
    const start = new Date(now - preset.ms);
    return {
      ok: true,
      period: {
        id: preset.id,
        since: start,
        until: undefined,
        days: daysBetween(start, new Date(now)),
        sinceDate: isoDay(start),
        untilDate: isoDay(new Date(now)),
        description: `from ${formatDate(start)} to now`,
      },
    };
  }
  const first = parseDay(since);
  if (first === undefined) {
    return {
      ok: false,
      message:
        since === ""
          ? "Give the first day of the period (From), as a date like 2031-05-01."
          : `"${since}" is not a date: write it as year-month-day, like 2031-05-01.`,
      form,
    };
  }
  const last = until === "" ? parseDay(isoDay(new Date(now))) : parseDay(until);
  if (last === undefined) {
    return {
      ok: false,
      message: `"${until}" is not a date: write it as year-month-day, like 2031-05-31.`,
      form,
    };
  }
  if (last.getTime() < first.getTime()) {
    return {
      ok: false,
      message: "The period ends before it starts: the To date is before the From date.",
      form,
    };
  }
  const end = new Date(last.getTime() + DAY_MS);
  const days = daysBetween(first, new Date(end.getTime() - 1));
  if (days.length > MAX_PERIOD_DAYS) {
    return {
      ok: false,
      message: `That period has ${days.length} days; choose at most ${MAX_PERIOD_DAYS} days at a time.`,
      form,
    };
  }
  return {
    ok: true,
    period: {
      id: "dates",
      since: first,
      until: end,
      days,
      sinceDate: isoDay(first),
      untilDate: isoDay(last),
      description: `from ${isoDay(first)} to ${isoDay(last)} (UTC days, inclusive)`,
    },
  };
}

/** Everything the page shows for one period. */
export interface UsageReport {
  totals: UsageTotals;
  byModel: UsageGroup[];
  byKey: UsageGroup[];
  /** Total tokens per model (in byModel's order) per day (in period.days' order). */
  tokensByModelAndDay: { model: string; values: number[] }[];
}

/** A request's `user` is at most 64 characters (src/http/openai/chat-request.ts): a longer filter cannot match. */
export const MAX_END_USER_CHARS = 64;

/**
 * Composes the report from UsageQueries.summary: by model, by key, and by day for each model used; with `user`,
 * only the requests that sent that `user`.
 */
export async function loadUsageReport(
  source: UsageSource,
  orgId: string,
  period: UsagePeriod,
  user?: string,
): Promise<UsageReport> {
  const range = { since: period.since, until: period.until, ...(user === undefined ? {} : { user }) };
  const byModel = await source.summary(orgId, { ...range, by: "model" });
  const byKey = await source.summary(orgId, { ...range, by: "key" });
  const dayIndex = new Map(period.days.map((day, i) => [day, i]));
  const series = await Promise.all(
    byModel.groups.map(async ({ key: model }) => {
      const values = period.days.map(() => 0);
      const byDay = await source.summary(orgId, { ...range, by: "day", model });
      for (const group of byDay.groups) {
        const i = dayIndex.get(group.key);
        if (i !== undefined) values[i] = group.total_tokens;
      }
      return { model, values };
    }),
  );
  return {
    totals: byModel.totals,
    byModel: byModel.groups,
    byKey: byKey.groups,
    tokensByModelAndDay: series,
  };
}

function parseDay(text: string): Date | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return undefined;
  const date = new Date(`${text}T00:00:00Z`);
  // Rejects 2031-02-30 and the like, which Date would roll over into March.
  return Number.isNaN(date.getTime()) || isoDay(date) !== text ? undefined : date;
}

function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** UTC days from the day of `first` to the day of `last`, both included. */
function daysBetween(first: Date, last: Date): string[] {
  const days: string[] = [];
  for (let t = Date.parse(`${isoDay(first)}T00:00:00Z`); t <= last.getTime(); t += DAY_MS) {
    days.push(isoDay(new Date(t)));
  }
  return days;
}
