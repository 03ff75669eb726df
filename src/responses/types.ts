// The stored-responses port (the Responses API's `store`): what is kept per organization, and the bounds on reading
// a `previous_response_id` chain back. No HTTP: items are the Responses API's JSON items, kept as the API lists them.
import { Refusal } from "../refusal.js";

/** One Responses API item as JSON (`{"type":"message",...}`, `{"type":"function_call",...}`, ...), with its `id`. */
export type ResponseItem = { type: string; id?: string } & Record<string, unknown>;

export interface StoredResponse {
  /** `resp_…` */
  id: string;
  orgId: string;
  model: string;
  createdAt: Date;
  /** Removed after this (hearth.yaml's retention); reads treat an expired response as absent. */
  expiresAt: Date;
  previousResponseId?: string | undefined;
  /** This request's own input items (not its ancestors'), as `GET /v1/responses/{id}/input_items` lists them. */
  inputItems: ResponseItem[];
  /** The response object as the client received it (status, output, usage, echoed request fields). */
  response: Record<string, unknown> & { output: ResponseItem[] };
}

/** A page of a response's input items, as OpenAI's list endpoints page (`after` an item id, `limit`, `order`). */
export interface InputItemsPage {
  items: ResponseItem[];
  hasMore: boolean;
}

export interface InputItemsQuery {
  after?: string | undefined;
  limit: number;
  order: "asc" | "desc";
}

/** What a rebuilt `previous_response_id` conversation may hold; exceeding one is refused, naming the bound. */
export interface ChainBounds {
  /** Ancestor responses followed at most. */
  maxResponses: number;
  /** Items in the rebuilt conversation (every ancestor's input and output items) at most. */
  maxItems: number;
  /** JSON bytes of the rebuilt conversation at most. */
  maxBytes: number;
}

export interface ResponsesStore {
  /** Keeps a response under its organization. Throws when the store is unavailable (the caller still meters). */
  save(record: StoredResponse): Promise<void>;
  /** The organization's response; undefined for an unknown, expired or deleted id and for another organization's. */
  get(orgId: string, id: string): Promise<StoredResponse | undefined>;
  /** True when the organization's response existed and is now gone. */
  delete(orgId: string, id: string): Promise<boolean>;
  /** The organization's response's input items, paged; undefined when the response is not the organization's. */
  inputItems(orgId: string, id: string, query: InputItemsQuery): Promise<InputItemsPage | undefined>;
  /**
   * The conversation `previous_response_id` continues, oldest first: for each response of the chain ending at
   * `id`, its input items, then its output items. Undefined when `id` is not the organization's; a
   * `ResponseChainTooLargeError` when the chain exceeds a bound.
   */
  conversation(orgId: string, id: string, bounds: ChainBounds): Promise<ResponseItem[] | undefined>;
  /** Removes responses whose `expiresAt` is before `now`; returns how many. */
  removeExpired(now: Date): Promise<number>;
}

/** A `previous_response_id` chain beyond one of its bounds: the client's, a 400 naming the field and the bound. */
export class ResponseChainTooLargeError extends Refusal {
  override name = "ResponseChainTooLargeError";
  readonly fault = "client";
  constructor(
    readonly bound: keyof ChainBounds,
    readonly limit: number,
  ) {
    super(`The conversation of previous_response_id exceeds ${limit} ${BOUND_TEXT[bound]}.`);
  }
}

const BOUND_TEXT: Record<keyof ChainBounds, string> = {
  maxResponses: "chained responses",
  maxItems: "items",
  maxBytes: "bytes",
};
