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
  const ordered = query.order === "asc" ? items : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const at = ordered.findIndex((item) => item.id === query.after);
    start = at === -1 ? ordered.length : at + 1;
  }
  const limit = Math.max(0, Math.floor(query.limit));
  return {
    items: ordered.slice(start, start + limit),
    hasMore: start + limit < ordered.length,
  };
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
