// The usage meter on the store: buffers records and writes them in batches, one multi-row INSERT per write,
// keeping (and retrying) whatever a failed write did not store. Writes are idempotent by request id: a retried
// write whose first attempt did commit (its answer lost to a stopped or hung store) adds nothing.
import { getTableColumns, type SQL, sql } from "drizzle-orm";
import type { StoreDb } from "../store/open-store.js";
import { usageRecords } from "../store/schema.js";
import {
  USAGE_ENDPOINTS,
  type UsageEndpoint,
  type UsageMeter,
  type UsageRecord,
  type UsageStatus,
} from "./types.js";

export interface PgUsageMeterOptions {
  /** Failed writes (the records stay buffered and are retried) and dropped records (UsageRecordsDroppedError). */
  onError: (err: unknown) => void;
  /** How long a record may wait in the buffer before it is written; what a `kill -9` can lose. Default 250. */
  flushIntervalMs?: number;
  /** Rows per INSERT statement (PostgreSQL allows 65,535 parameters: 13 per row). Default 1,000. */
  maxBatch?: number;
  /**
   * Records held while the store is failing; past it the oldest are dropped (reported as
   * UsageRecordsDroppedError). Default 100,000: minutes of an outage at hundreds of requests per second.
   */
  maxBuffered?: number;
  /** While writes keep failing, the retry delay doubles from flushIntervalMs up to this. Default 4,000. */
  maxRetryDelayMs?: number;
  /** How long dispose() keeps retrying a failing store before it gives the buffer up. Default 5,000. */
  disposeTimeoutMs?: number;
}

export const USAGE_METER_DEFAULTS = Object.freeze({
  flushIntervalMs: 250,
  maxBatch: 1000,
  maxBuffered: 100_000,
  maxRetryDelayMs: 4000,
  disposeTimeoutMs: 5000,
});

// 13 bound parameters per row; PostgreSQL's wire protocol allows 65,535 per statement.
const MAX_ROWS_PER_INSERT = 5000;
const MAX_INT4 = 2_147_483_647;
const STATUSES: ReadonlySet<UsageStatus> = new Set<UsageStatus>(["completed", "aborted", "error"]);
const ENDPOINTS: ReadonlySet<UsageEndpoint> = new Set<UsageEndpoint>(USAGE_ENDPOINTS);

/** Records the meter had to give up: the buffer was full, the store refused them, or it stayed down at stop. */
export class UsageRecordsDroppedError extends Error {
  override name = "UsageRecordsDroppedError";
  constructor(
    readonly count: number,
    readonly reason: string,
    override readonly cause?: unknown,
  ) {
    super(`usage meter dropped ${count} usage record${count === 1 ? "" : "s"}: ${reason}`);
  }
}

type Row = typeof usageRecords.$inferInsert;

export class PgUsageMeter implements UsageMeter {
  private readonly flushIntervalMs: number;
  private readonly maxBatch: number;
  private readonly maxBuffered: number;
  private readonly maxRetryDelayMs: number;
  private readonly disposeTimeoutMs: number;
  /** Oldest first; a failed batch goes back to the front, so records are written in arrival order. */
  private buffer: Row[] = [];
  /** Records ever accepted, and records written or given up: flush() waits until the second reaches the first. */
  private accepted = 0;
  private settled = 0;
  private writing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private disposed = false;
  /** Single-row writes of records that arrived after dispose(). */
  private readonly late = new Set<Promise<void>>();

  constructor(
    private readonly db: StoreDb,
    private readonly options: PgUsageMeterOptions,
  ) {
    this.flushIntervalMs = positive(options.flushIntervalMs, USAGE_METER_DEFAULTS.flushIntervalMs);
    this.maxBatch = Math.min(positive(options.maxBatch, USAGE_METER_DEFAULTS.maxBatch), MAX_ROWS_PER_INSERT);
    this.maxBuffered = positive(options.maxBuffered, USAGE_METER_DEFAULTS.maxBuffered);
    this.maxRetryDelayMs = Math.max(
      positive(options.maxRetryDelayMs, USAGE_METER_DEFAULTS.maxRetryDelayMs),
      this.flushIntervalMs,
    );
    this.disposeTimeoutMs = positive(options.disposeTimeoutMs, USAGE_METER_DEFAULTS.disposeTimeoutMs);
  }

  /** How many records wait to be written. */
  get buffered(): number {
    return this.buffer.length;
  }

  record(record: UsageRecord): void {
    try {
      const row = toRow(record);
      if (this.disposed) {
        this.writeLate(row);
        return;
      }
      this.buffer.push(row);
      this.accepted++;
      if (this.buffer.length > this.maxBuffered) {
        const excess = this.buffer.length - this.maxBuffered;
        this.buffer.splice(0, excess);
        this.settled += excess;
        this.report(new UsageRecordsDroppedError(excess, `the buffer is full (${this.maxBuffered} records)`));
      }
      this.schedule(this.flushIntervalMs);
    } catch (err) {
      // The port promises never to throw into a request's settlement.
      this.report(err);
    }
  }

  async flush(): Promise<void> {
    const target = this.accepted;
    while (this.settled < target) await this.drain();
    await Promise.all(this.late);
  }

  async dispose(): Promise<void> {
    if (this.disposed) return this.flush();
    this.disposed = true;
    this.clearTimer();
    const deadline = Date.now() + this.disposeTimeoutMs;
    let delay = this.flushIntervalMs;
    for (;;) {
      try {
        await this.flush();
        return;
      } catch (err) {
        if (Date.now() + delay > deadline) {
          const lost = this.buffer.length;
          this.buffer = [];
          this.settled += lost;
          this.report(
            new UsageRecordsDroppedError(lost, "the store kept failing while the meter was stopped", err),
          );
          await Promise.all(this.late);
          return;
        }
        await sleep(delay);
        delay = Math.min(delay * 2, this.maxRetryDelayMs);
      }
    }
  }

  /** Writes the buffer in batches until it is empty; one writer at a time. Rejects when a write fails. */
  private drain(): Promise<void> {
    this.writing ??= this.writeAll().finally(() => {
      this.writing = undefined;
    });
    return this.writing;
  }

  private async writeAll(): Promise<void> {
    while (this.buffer.length > 0) {
      const batch = this.buffer.splice(0, this.maxBatch);
      let written = batch.length;
      let failure: unknown;
      try {
        await this.db.execute(batchInsert(batch));
      } catch (err) {
        // A refused row (not a failed write) would fail every retry of its batch and wedge the meter.
        if (isDataError(err)) ({ written, failure } = await this.writeOneByOne(batch));
        else [written, failure] = [0, err];
      }
      this.settled += written;
      if (written < batch.length) {
        this.buffer.unshift(...batch.slice(written));
        this.failures++;
        this.report(failure);
        this.schedule(this.retryDelay());
        throw failure;
      }
      this.failures = 0;
    }
  }

  /**
   * Writes a batch the store refused row by row and gives up only the rows it refuses again. `written` counts
   * the rows settled (stored or given up) before a failure of the store itself, which stops the walk.
   */
  private async writeOneByOne(batch: Row[]): Promise<{ written: number; failure?: unknown }> {
    for (const [i, row] of batch.entries()) {
      try {
        await this.db
          .insert(usageRecords)
          .values(row)
          .onConflictDoNothing({ target: [usageRecords.orgId, usageRecords.requestId] });
      } catch (err) {
        if (!isDataError(err)) return { written: i, failure: err };
        this.report(new UsageRecordsDroppedError(1, `the store refused request ${row.requestId}`, err));
      }
    }
    return { written: batch.length };
  }

  private writeLate(row: Row): void {
    const write = this.db
      .insert(usageRecords)
      .values(row)
      .onConflictDoNothing({ target: [usageRecords.orgId, usageRecords.requestId] })
      .then(
        () => {},
        (err: unknown) => this.report(new UsageRecordsDroppedError(1, "writing after dispose failed", err)),
      );
    this.late.add(write);
    void write.finally(() => this.late.delete(write));
  }

  private retryDelay(): number {
    return Math.min(this.flushIntervalMs * 2 ** (this.failures - 1), this.maxRetryDelayMs);
  }

  private schedule(delay: number): void {
    if (this.timer !== undefined || this.disposed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // A failure has been reported and a retry scheduled by writeAll.
      this.drain().catch(() => {});
    }, delay);
    // dispose() flushes on a clean stop; the timer alone must not keep a finished process alive.
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private report(err: unknown): void {
    try {
      this.options.onError(err);
    } catch {
      // a failing logger must not break the meter
    }
  }
}

/** The record as a row the table accepts: whole, non-negative int4 counts, a valid instant, no NUL bytes. */
function toRow(r: UsageRecord): Row {
  return {
    at: r.at instanceof Date && !Number.isNaN(r.at.getTime()) ? r.at : new Date(),
    orgId: text(r.orgId),
    keyId: text(r.keyId),
    model: text(r.model),
    requestId: text(r.requestId),
    promptTokens: count(r.promptTokens),
    completionTokens: count(r.completionTokens),
    reasoningTokens: count(r.reasoningTokens),
    cachedTokens: count(r.cachedTokens),
    status: STATUSES.has(r.status) ? r.status : "error",
    latencyMs: count(r.latencyMs),
    user: r.user === undefined || r.user === "" ? null : text(r.user),
    endpoint: r.endpoint !== undefined && ENDPOINTS.has(r.endpoint) ? r.endpoint : "chat.completions",
  };
}

/** The table's columns but its generated id: the batch's fields, in order. */
const BATCH_COLUMNS = Object.entries(getTableColumns(usageRecords)).filter(([key]) => key !== "id");

/** `json_to_recordset`'s record type: each column's name and SQL type. */
const BATCH_RECORD = sql.raw(BATCH_COLUMNS.map(([, c]) => `"${c.name}" ${c.getSQLType()}`).join(", "));
const BATCH_NAMES = sql.raw(BATCH_COLUMNS.map(([, c]) => `"${c.name}"`).join(", "));

/**
 * One INSERT of a whole batch with the rows as one JSON parameter, which PostgreSQL unpacks: building the statement
 * costs the same for one row as for a thousand (drizzle's builder took tens of µs of the service's CPU per row,
 * per request at a gateway's rates). A request id already stored is skipped (a retried write adds nothing).
 */
function batchInsert(batch: readonly Row[]): SQL {
  const rows = batch.map((row) =>
    Object.fromEntries(BATCH_COLUMNS.map(([key, c]) => [c.name, row[key as keyof Row] ?? null])),
  );
  return sql`insert into ${usageRecords} (${BATCH_NAMES}) select ${BATCH_NAMES} from json_to_recordset(${JSON.stringify(rows)}::json) as r(${BATCH_RECORD}) on conflict (${sql.raw(`"${usageRecords.orgId.name}", "${usageRecords.requestId.name}"`)}) do nothing`;
}

function count(n: number): number {
  return Number.isFinite(n) ? Math.min(Math.max(0, Math.round(n)), MAX_INT4) : 0;
}

function text(s: string): string {
  return String(s).replaceAll("\0", "");
}

/**
 * SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation): the rows themselves were refused,
 * so writing them again cannot succeed. Drizzle wraps the driver's error in `cause`.
 */
function isDataError(err: unknown): boolean {
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^2[23][0-9A-Z]{3}$/.test(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
