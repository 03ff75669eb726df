// Stored responses in memory: for unit tests and app tests without a database. Same rules as the PostgreSQL store
// (organization scoping, expiry, chain bounds), one process only.
import { boundedChain, conversationShare, outputItems, pageItems } from "./items.js";
import type {
  ChainBounds,
  InputItemsPage,
  InputItemsQuery,
  ResponseItem,
  ResponsesStore,
  StoredResponse,
} from "./types.js";

export interface MemoryResponsesStoreOptions {
  /** The current instant (tests move it to expire responses). Default: the system clock. */
  now?: () => Date;
}

export class MemoryResponsesStore implements ResponsesStore {
  private readonly records = new Map<string, StoredResponse>();
  private readonly now: () => Date;

  constructor(options: MemoryResponsesStoreOptions = {}) {
    this.now = options.now ?? (() => new Date());
  }

  /** How many responses are held, expired ones included (until removeExpired). */
  get size(): number {
    return this.records.size;
  }

  async save(record: StoredResponse): Promise<void> {
    // A copy, so neither side can change the other's objects afterwards (as a database would not).
    this.records.set(record.id, structuredClone(record));
  }

  async get(orgId: string, id: string): Promise<StoredResponse | undefined> {
    const record = this.visible(orgId, id);
    return record === undefined ? undefined : structuredClone(record);
  }

  async delete(orgId: string, id: string): Promise<boolean> {
    if (this.visible(orgId, id) === undefined) return false;
    return this.records.delete(id);
  }

  async inputItems(orgId: string, id: string, query: InputItemsQuery): Promise<InputItemsPage | undefined> {
    const record = this.visible(orgId, id);
    return record === undefined ? undefined : structuredClone(pageItems(record.inputItems, query));
  }

  async conversation(orgId: string, id: string, bounds: ChainBounds): Promise<ResponseItem[] | undefined> {
    const first = this.visible(orgId, id);
    if (first === undefined) return undefined;
    // Newest first, one more than allowed so that too long a chain shows; a cycle stops at the bound too.
    const links: { id: string; items: number; bytes: number; record: StoredResponse }[] = [];
    for (
      let record: StoredResponse | undefined = first;
      record !== undefined && links.length <= bounds.maxResponses;
      record =
        record.previousResponseId === undefined ? undefined : this.visible(orgId, record.previousResponseId)
    ) {
      links.push({ id: record.id, ...conversationShare(record), record });
    }
    const chain = boundedChain(links, bounds);
    const items: ResponseItem[] = [];
    for (const { record } of chain.reverse())
      items.push(...record.inputItems, ...outputItems(record.response));
    return structuredClone(items);
  }

  async removeExpired(now: Date): Promise<number> {
    let removed = 0;
    for (const [id, record] of this.records) {
      if (record.expiresAt.getTime() < now.getTime()) {
        this.records.delete(id);
        removed++;
      }
    }
    return removed;
  }

  /** The organization's unexpired response: another organization's id is as absent as an unknown one. */
  private visible(orgId: string, id: string): StoredResponse | undefined {
    const record = this.records.get(id);
    if (record === undefined || record.orgId !== orgId) return undefined;
    return record.expiresAt.getTime() > this.now().getTime() ? record : undefined;
  }
}
