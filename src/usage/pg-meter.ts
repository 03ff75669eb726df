// The usage meter on the store: buffers records and writes them in batches.
// PLACEHOLDER until the usage work lands: writes each record at once.
import type { StoreDb } from "../store/open-store.js";
import { usageRecords } from "../store/schema.js";
import type { UsageMeter, UsageRecord } from "./types.js";

export interface PgUsageMeterOptions {
  onError: (err: unknown) => void;
}

export class PgUsageMeter implements UsageMeter {
  private readonly pending = new Set<Promise<unknown>>();
  constructor(
    private readonly db: StoreDb,
    private readonly options: PgUsageMeterOptions,
  ) {}

  record(record: UsageRecord): void {
    const write = this.db.insert(usageRecords).values(record).catch(this.options.onError);
    this.pending.add(write);
    void write.finally(() => this.pending.delete(write));
  }

  async flush(): Promise<void> {
    await Promise.all(this.pending);
  }

  async dispose(): Promise<void> {
    await this.flush();
  }
}
