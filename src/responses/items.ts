// Pure rules both response stores share: an item's size, paging a response's input items, and reading a
// `previous_response_id` chain back within its bounds.
import {
  type ChainBounds,
  type InputItemsPage,
  type InputItemsQuery,
  ResponseChainTooLargeError,
  type ResponseItem,
  type StoredResponse,
} from "./types.js";

/** UTF-8 bytes of the items' JSON, item by item (what the chain's byte bound counts). */
export function itemsBytes(items: readonly ResponseItem[]): number {
  let bytes = 0;
  for (const item of items) bytes += Buffer.byteLength(JSON.stringify(item) ?? "", "utf8");
  return bytes;
}

/** A response's share of a rebuilt conversation: its input items and output items, and their bytes. */
export function conversationShare(record: Pick<StoredResponse, "inputItems" | "response">): {
  items: number;
  bytes: number;
} {
  const output = outputItems(record.response);
  return {
    items: record.inputItems.length + output.length,
    bytes: itemsBytes(record.inputItems) + itemsBytes(output),
  };
}

/** The response object's `output`, or none when a malformed record has no array there. */
export function outputItems(response: StoredResponse["response"]): ResponseItem[] {
  return Array.isArray(response.output) ? response.output : [];
}

/**
 * One page of input items as OpenAI's list endpoints page them: in `order` (desc = the last item first), the
 * items after the one whose id is `after` in that order, at most `limit`. An `after` that is no item's id gives
 * an empty page (the cursor points past everything this response holds).
 */
export function pageItems(items: readonly ResponseItem[], query: InputItemsQuery): InputItemsPage {
  const after = query.after === undefined ? undefined : items.findIndex((item) => item.id === query.after);
  const window = pageWindow(items.length, after, query);
  const page = items.slice(window.from, window.to);
  return { items: query.order === "desc" ? page.reverse() : page, hasMore: window.hasMore };
}

/** A page as positions in the stored array: items [from, to), listed in reverse for `desc`. */
export interface PageWindow {
  from: number;
  to: number;
  hasMore: boolean;
}

/**
 * The page of `count` items after the item at position `afterIndex` (undefined: from the start of `order`; -1:
 * an id no item has, so nothing follows). Shared by both stores so they page alike.
 */
export function pageWindow(
  count: number,
  afterIndex: number | undefined,
  query: Pick<InputItemsQuery, "limit" | "order">,
): PageWindow {
  const limit = Math.max(0, Math.floor(query.limit));
  // Positions in the listed order: asc lists the array as stored, desc from its end.
  const listed = (index: number) => (query.order === "asc" ? index : count - 1 - index);
  const start = afterIndex === undefined ? 0 : afterIndex < 0 ? count : listed(afterIndex) + 1;
  const end = Math.min(count, start + limit);
  const hasMore = end < count;
  if (start >= end) return { from: 0, to: 0, hasMore };
  return query.order === "asc"
    ? { from: start, to: end, hasMore }
    : { from: count - end, to: count - start, hasMore };
}

/** One response of a chain as read back, newest first, before its items are loaded. */
export interface ChainLink {
  id: string;
  items: number;
  bytes: number;
}

/**
 * The chain to rebuild, newest first, from the links read back by following `previous_response_id` (at most
 * `bounds.maxResponses + 1` of them, so that one too many shows). A link seen before closes a cycle: the chain
 * stops there, each response counted once. Throws ResponseChainTooLargeError naming the first bound exceeded.
 */
export function boundedChain<T extends ChainLink>(links: readonly T[], bounds: ChainBounds): T[] {
  const seen = new Set<string>();
  const chain: T[] = [];
  for (const link of links) {
    if (seen.has(link.id)) break;
    seen.add(link.id);
    chain.push(link);
  }
  if (chain.length > bounds.maxResponses) {
    throw new ResponseChainTooLargeError("maxResponses", bounds.maxResponses);
  }
  let items = 0;
  let bytes = 0;
  for (const link of chain) {
    items += link.items;
    bytes += link.bytes;
  }
  if (items > bounds.maxItems) throw new ResponseChainTooLargeError("maxItems", bounds.maxItems);
  if (bytes > bounds.maxBytes) throw new ResponseChainTooLargeError("maxBytes", bounds.maxBytes);
  return chain;
}
