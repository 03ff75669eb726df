// Usage summaries of an organization over a time range, for the admin API, the CLI and the dashboard.
import { and, eq, gte, lt, type SQL, sql } from "drizzle-orm";
import type { StoreDb } from "../store/open-store.js";
import { usageRecords } from "../store/schema.js";

/** Snake case, as on the wire (OpenAI's usage objects are snake case too). */
export interface UsageTotals {
  /** Admitted requests: completed, aborted and failed ones. */
  requests: number;
  prompt_tokens: number;
  /** Every generated token, reasoning included. */
  completion_tokens: number;
  reasoning_tokens: number;
  /** Prompt tokens served from the prefix cache (part of prompt_tokens). */
  cached_tokens: number;
  /** prompt_tokens + completion_tokens. */
  total_tokens: number;
  /** Requests whose client left before the end (their tokens up to then are counted). */
  aborted: number;
  /** Requests that failed after admission. */
  errors: number;
}

export const USAGE_GROUP_BY = Object.freeze(["day", "model", "key", "endpoint"] as const);
export type UsageGroupBy = (typeof USAGE_GROUP_BY)[number];

export interface UsageQuery {
  /** Inclusive lower bound on the instant a request ended; absent = from the first record. */
  since?: Date | undefined;
  /** Exclusive upper bound; absent = up to now (and anything later). */
  until?: Date | undefined;
  /**
   * "day": UTC days `YYYY-MM-DD`; "model": model ids; "key": API key ids; "endpoint": `chat.completions` or
   * `responses`. Absent: no groups.
   */
  by?: UsageGroupBy | undefined;
  /** Only this model's records (e.g. one chart series: by day for one model). */
  model?: string | undefined;
  /** Only the records of requests that sent this `user` (exact match). */
  user?: string | undefined;
}

export type UsageGroup = { key: string } & UsageTotals;

export interface UsageSummary {
  totals: UsageTotals;
  /** Only keys with at least one record, ordered by key (so days are chronological); [] without `by`. */
  groups: UsageGroup[];
}

const t = usageRecords;

// Counts come back from the drivers as bigint strings; totals stay far below 2^53.
const TOTALS = {
  requests: sql<number>`count(*)`.mapWith(Number),
  prompt_tokens: sql<number>`coalesce(sum(${t.promptTokens}), 0)`.mapWith(Number),
  completion_tokens: sql<number>`coalesce(sum(${t.completionTokens}), 0)`.mapWith(Number),
  reasoning_tokens: sql<number>`coalesce(sum(${t.reasoningTokens}), 0)`.mapWith(Number),
  cached_tokens: sql<number>`coalesce(sum(${t.cachedTokens}), 0)`.mapWith(Number),
  total_tokens: sql<number>`coalesce(sum(${t.promptTokens}::bigint + ${t.completionTokens}), 0)`.mapWith(
    Number,
  ),
  aborted: sql<number>`count(*) filter (where ${t.status} = 'aborted')`.mapWith(Number),
  errors: sql<number>`count(*) filter (where ${t.status} = 'error')`.mapWith(Number),
};

// No bound parameters in these, so GROUP BY and ORDER BY can name them by position.
const GROUP_KEYS: Readonly<Record<UsageGroupBy, SQL<string>>> = Object.freeze({
  day: sql<string>`to_char(${t.at} at time zone 'UTC', 'YYYY-MM-DD')`,
  model: sql<string>`${t.model}`,
  key: sql<string>`${t.keyId}`,
  endpoint: sql<string>`${t.endpoint}`,
});

export function emptyUsageTotals(): UsageTotals {
  return {
    requests: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    reasoning_tokens: 0,
    cached_tokens: 0,
    total_tokens: 0,
    aborted: 0,
    errors: 0,
  };
}

export class UsageQueries {
  constructor(private readonly db: StoreDb) {}

  /** An organization's usage (by org id; the records outlive the org's name) over [since, until). */
  async summary(orgId: string, q: UsageQuery = {}): Promise<UsageSummary> {
    const conditions = [eq(t.orgId, orgId)];
    if (q.since !== undefined) conditions.push(gte(t.at, q.since));
    if (q.until !== undefined) conditions.push(lt(t.at, q.until));
    if (q.model !== undefined) conditions.push(eq(t.model, q.model));
    if (q.user !== undefined) conditions.push(eq(t.user, q.user));
    const where = and(...conditions);
    if (q.by === undefined) {
      const [row] = await this.db.select(TOTALS).from(t).where(where);
      return { totals: row ?? emptyUsageTotals(), groups: [] };
    }
    const groups = await this.db
      .select({ key: GROUP_KEYS[q.by], ...TOTALS })
      .from(t)
      .where(where)
      .groupBy(sql`1`)
      .orderBy(sql`1`);
    // Totals from the same rows: one snapshot, so they always equal the sum of the groups.
    const totals = emptyUsageTotals();
    for (const group of groups) {
      for (const field of Object.keys(totals) as (keyof UsageTotals)[]) totals[field] += group[field];
    }
    return { totals, groups };
  }
}
