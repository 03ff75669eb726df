// Stored responses in the store (PGlite or PostgreSQL): one row per response, read only by its organization and
// only until it expires; a previous_response_id chain is measured in one recursive query before any item is loaded.
import { and, eq, gt, inArray, lt, sql } from "drizzle-orm";
import type { StoreDb } from "../store/open-store.js";
import { responses } from "../store/schema.js";
import { StoreUnavailableError } from "../store/store-status.js";
import { boundedChain, type ChainLink, conversationShare, outputItems, pageWindow } from "./items.js";
import {
  type ChainBounds,
  type InputItemsPage,
  type InputItemsQuery,
  ResponseChainTooLargeError,
  type ResponseItem,
  type ResponsesStore,
  type StoredResponse,
} from "./types.js";

export interface PgResponsesStoreOptions {
  /** The current instant (tests move it to expire responses). Default: the system clock. */
  now?: () => Date;
  /** Rows one statement of removeExpired deletes, so that a large backlog never makes one long statement. */
  sweepBatch?: number;
}

const DEFAULT_SWEEP_BATCH = 1000;

export class PgResponsesStore implements ResponsesStore {
  private readonly now: () => Date;
  private readonly sweepBatch: number;

  constructor(
    private readonly db: StoreDb,
    options: PgResponsesStoreOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.sweepBatch = Math.max(1, Math.floor(options.sweepBatch ?? DEFAULT_SWEEP_BATCH));
  }

  async save(record: StoredResponse): Promise<void> {
    const share = conversationShare(record);
    await this.db
      .insert(responses)
      .values({
        id: record.id,
        orgId: record.orgId,
        model: record.model,
        createdAt: record.createdAt,
        expiresAt: record.expiresAt,
        previousResponseId: record.previousResponseId ?? null,
        inputItems: sql`${storableJson(record.inputItems)}::jsonb`,
        response: sql`${storableJson(record.response)}::jsonb`,
        size: share.bytes,
        itemCount: share.items,
      })
      // A save retried after its answer was lost (the row is there) is done, not an error.
      .onConflictDoNothing({ target: responses.id });
  }

  get(orgId: string, id: string): Promise<StoredResponse | undefined> {
    return unavailableAs(() => this.readResponse(orgId, id));
  }

  private async readResponse(orgId: string, id: string): Promise<StoredResponse | undefined> {
    const [row] = await this.db.select().from(responses).where(this.visible(orgId, id));
    if (row === undefined) return undefined;
    return {
      id: row.id,
      orgId: row.orgId,
      model: row.model,
      createdAt: row.createdAt,
      expiresAt: row.expiresAt,
      previousResponseId: row.previousResponseId ?? undefined,
      inputItems: row.inputItems,
      response: row.response,
    };
  }

  delete(orgId: string, id: string): Promise<boolean> {
    return unavailableAs(() => this.deleteResponse(orgId, id));
  }

  private async deleteResponse(orgId: string, id: string): Promise<boolean> {
    const deleted = await this.db
      .delete(responses)
      .where(this.visible(orgId, id))
      .returning({ id: responses.id });
    return deleted.length > 0;
  }

  inputItems(orgId: string, id: string, query: InputItemsQuery): Promise<InputItemsPage | undefined> {
    return unavailableAs(() => this.readPage(orgId, id, query));
  }

  private async readPage(
    orgId: string,
    id: string,
    query: InputItemsQuery,
  ): Promise<InputItemsPage | undefined> {
    // First where the page lies (the count, and the cursor's position), then only that page's items.
    const [found] = await this.db
      .select({
        count: sql<number>`jsonb_array_length(${responses.inputItems})`.mapWith(Number),
        after:
          query.after === undefined
            ? sql<null>`null`
            : sql<number | null>`(select e.ord - 1 from jsonb_array_elements(${responses.inputItems})
                with ordinality as e(item, ord) where e.item->>'id' = ${query.after} limit 1)`,
      })
      .from(responses)
      .where(this.visible(orgId, id));
    if (found === undefined) return undefined;
    const afterIndex =
      query.after === undefined ? undefined : found.after === null ? -1 : Number(found.after);
    const window = pageWindow(found.count, afterIndex, query);
    if (window.to <= window.from) return { items: [], hasMore: window.hasMore };
    const rows = await this.db
      .select({ item: sql<ResponseItem>`${responses.inputItems} -> (g.i)::int` })
      .from(responses)
      .innerJoin(sql`generate_series(${window.from}::int, ${window.to - 1}::int) as g(i)`, sql`true`)
      .where(this.visible(orgId, id))
      .orderBy(sql`g.i`);
    const items = rows.map((r) => parseJsonb(r.item));
    return { items: query.order === "desc" ? items.reverse() : items, hasMore: window.hasMore };
  }

  conversation(orgId: string, id: string, bounds: ChainBounds): Promise<ResponseItem[] | undefined> {
    return unavailableAs(() => this.readChain(orgId, id, bounds));
  }

  private async readChain(
    orgId: string,
    id: string,
    bounds: ChainBounds,
  ): Promise<ResponseItem[] | undefined> {
    const now = this.now();
    // The chain newest first, measured by the stored sizes only; one row more than allowed shows too long a chain,
    // and the depth bound also ends a cycle. A link that is missing (deleted, expired, another organization's)
    // ends the chain there.
    const result = await this.db.execute(sql`
      with recursive chain(id, prev, items, bytes, depth) as (
        select id, previous_response_id, item_count, size, 1
          from responses where id = ${id} and org_id = ${orgId} and expires_at > ${now}
        union all
        select r.id, r.previous_response_id, r.item_count, r.size, c.depth + 1
          from chain c join responses r on r.id = c.prev
          where r.org_id = ${orgId} and r.expires_at > ${now} and c.depth <= ${bounds.maxResponses}
      )
      select id, items, bytes, depth from chain order by depth`);
    const links: ChainLink[] = rowsOf<{ id: unknown; items: unknown; bytes: unknown }>(result).map((r) => ({
      id: String(r.id),
      items: Number(r.items),
      bytes: Number(r.bytes),
    }));
    if (links.length === 0) return undefined;
    const chain = boundedChain(links, bounds);
    const rows = await this.db
      .select({
        id: responses.id,
        inputItems: responses.inputItems,
        output: sql<unknown>`${responses.response}->'output'`,
      })
      .from(responses)
      .where(
        and(
          inArray(
            responses.id,
            chain.map((l) => l.id),
          ),
          eq(responses.orgId, orgId),
        ),
      );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const items: ResponseItem[] = [];
    // Oldest first. A response removed between the two reads leaves its items out, as if the chain had been cut.
    for (const link of chain.reverse()) {
      const row = byId.get(link.id);
      if (row === undefined) continue;
      const output = parseJsonb(row.output);
      items.push(...row.inputItems, ...outputItems({ output: Array.isArray(output) ? output : [] }));
    }
    return items;
  }

  async removeExpired(now: Date): Promise<number> {
    let removed = 0;
    for (;;) {
      // In batches: each statement stays short, and replicas sweeping at once skip each other's rows.
      const expired = this.db
        .select({ id: responses.id })
        .from(responses)
        .where(lt(responses.expiresAt, now))
        .limit(this.sweepBatch)
        .for("update", { skipLocked: true });
      const deleted = await this.db
        .delete(responses)
        .where(inArray(responses.id, expired))
        .returning({ id: responses.id });
      removed += deleted.length;
      if (deleted.length < this.sweepBatch) return removed;
    }
  }

  /** The organization's unexpired response: another organization's id is as absent as an unknown one. */
  private visible(orgId: string, id: string) {
    return and(eq(responses.id, id), eq(responses.orgId, orgId), gt(responses.expiresAt, this.now()));
  }
}

/**
 * A read that fails because of the store (down, hung past the pool's bounds, refusing) is a StoreUnavailableError:
 * the caller answers 503, retry later. A chain over its bounds is the client's and passes as it is.
 */
async function unavailableAs<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof ResponseChainTooLargeError) throw err;
    throw new StoreUnavailableError("stored responses cannot be read: the store is unavailable", {
      cause: err,
    });
  }
}

/** Rows of a raw query on either driver (node-postgres and PGlite both answer `{ rows }`). */
function rowsOf<T>(result: unknown): T[] {
  const rows = (result as { rows?: unknown }).rows;
  return Array.isArray(rows) ? (rows as T[]) : [];
}

/** A jsonb value read through a raw SQL expression: the drivers parse it, but be safe if one hands back text. */
function parseJsonb<T>(value: T | string): T {
  return typeof value === "string" ? (JSON.parse(value) as T) : value;
}

/**
 * The value's JSON as PostgreSQL's jsonb accepts it: jsonb cannot hold U+0000 (dropped) or a lone surrogate
 * (replaced by U+FFFD). JSON.stringify writes a well-formed pair as characters and escapes only lone surrogates,
 * so every \uD800–\uDFFF escape in its text is one.
 */
export function storableJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /\\(?:u([0-9a-fA-F]{4})|[^u])/g,
    (sequence, hex: string | undefined) => {
      if (hex === undefined) return sequence;
      const code = Number.parseInt(hex, 16);
      if (code === 0) return "";
      return code >= 0xd800 && code <= 0xdfff ? "\\ufffd" : sequence;
    },
  );
}
