// Coalesces API keys' last-use times in memory and writes them in batches: no database write per request.
import { sql } from "drizzle-orm";
import type { StoreDb } from "../store/open-store.js";
import { apiKeys } from "../store/schema.js";

export interface LastUsedRecorderOptions {
  /** How long a use waits in memory before it is written; a crash loses at most this much. */
  flushIntervalMs: number;
  /** Called when a background flush fails (the entries are kept for the next one). */
  onError: (err: unknown) => void;
}

// Keeps each UPDATE's parameter list well below PostgreSQL's 65535 limit.
const MAX_ROWS_PER_STATEMENT = 500;

export class LastUsedRecorder {
  /** Latest use per key id (ms since epoch) not yet written. */
  private pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private disposed = false;

  constructor(
    private readonly db: StoreDb,
    private readonly options: LastUsedRecorderOptions,
  ) {}

  /** Notes a use; O(1), no I/O. */
  record(keyId: string, at: number): void {
    const previous = this.pending.get(keyId);
    if (previous === undefined || at > previous) this.pending.set(keyId, at);
    this.schedule();
  }

  /** A use recorded but not yet written, so lists can show it before the flush. */
  pendingFor(keyId: string): number | undefined {
    return this.pending.get(keyId);
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  /** Writes everything recorded so far; concurrent calls run one after the other. Rejects if the write fails. */
  flush(): Promise<void> {
    const run = this.flushing.then(() => this.writePending());
    // The chain must survive a failed flush, or every later flush would fail with the same error.
    this.flushing = run.catch(() => {});
    return run;
  }

  /** Stops the timer and writes what is left (the shutdown path). */
  async dispose(): Promise<void> {
    this.disposed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.disposed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush().catch((err: unknown) => {
        this.options.onError(err);
        if (this.pending.size > 0) this.schedule();
      });
    }, this.options.flushIntervalMs);
    // A pending flush must not keep a finished process alive; dispose() writes what is left.
    this.timer.unref();
  }

  private async writePending(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const entries = [...batch];
    try {
      for (let i = 0; i < entries.length; i += MAX_ROWS_PER_STATEMENT) {
        const rows = entries
          .slice(i, i + MAX_ROWS_PER_STATEMENT)
          .map(([id, at]) => sql`(${id}, ${new Date(at).toISOString()}::timestamptz)`);
        // greatest(): another replica may have written a later use already; last_used_at never moves back.
        await this.db.execute(sql`
          update ${apiKeys} as k
          set last_used_at = greatest(coalesce(k.last_used_at, v.t), v.t)
          from (values ${sql.join(rows, sql`, `)}) as v(id, t)
          where k.id = v.id`);
      }
    } catch (err) {
      // Put the batch back (keeping later uses recorded meanwhile) so the next flush retries it.
      for (const [id, at] of batch) {
        const newer = this.pending.get(id);
        if (newer === undefined || at > newer) this.pending.set(id, at);
      }
      throw err;
    }
  }
}
