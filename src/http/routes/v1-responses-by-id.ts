// GET and DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items: the stored responses of the key's
// organization, as OpenAI serves them. Another organization's id is answered exactly like an unknown one. A store
// that cannot answer throws StoreUnavailableError, which the one error map answers 503 store_unavailable (retry).
import type { Context } from "hono";
import { z } from "zod";
import type { ResponsesStore } from "../../responses/types.js";
import type { AppEnv } from "../env.js";
import { InvalidRequestError, NotFoundError } from "../errors/api-error.js";
import { validate } from "../validation.js";

export interface ResponsesByIdDeps {
  responses: ResponsesStore;
}

/** OpenAI's list bounds for input_items: limit 1–100, default 20; newest first by default. */
const inputItemsQuerySchema = z.object({
  after: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  order: z.enum(["asc", "desc"]).default("desc"),
  // Accepted and ignored: nothing Hearth stores has the extra fields `include` asks for (search results, images,
  // encrypted reasoning, logprobs).
  include: z.array(z.string()).optional(),
});

/** GET /v1/responses/{id} takes `include` and `stream`; a stored response is not replayed as a stream. */
const retrieveQuerySchema = z.object({
  include: z.array(z.string()).optional(),
  stream: z.enum(["true", "false"]).optional(),
});

export async function retrieveResponse(c: Context<AppEnv>, deps: ResponsesByIdDeps): Promise<Response> {
  const query = validate(queryOf(c, ["include"]), retrieveQuerySchema);
  if (query.stream === "true") {
    throw new InvalidRequestError(
      "Streaming a stored response back is not supported; omit 'stream'.",
      "stream",
    );
  }
  const id = c.req.param("id") ?? "";
  const stored = await deps.responses.get(c.get("principal").orgId, id);
  if (stored === undefined) throw notFound(id);
  return c.json(stored.response);
}

export async function deleteResponse(c: Context<AppEnv>, deps: ResponsesByIdDeps): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const deleted = await deps.responses.delete(c.get("principal").orgId, id);
  if (!deleted) throw notFound(id);
  return c.json({ id, object: "response", deleted: true });
}

export async function listInputItems(c: Context<AppEnv>, deps: ResponsesByIdDeps): Promise<Response> {
  const raw = queryOf(c, ["include"]);
  if (raw.before !== undefined) {
    // An older version of OpenAI's API paged backwards too; the current one pages with `after` only.
    throw new InvalidRequestError(
      "Unsupported parameter: 'before'. Page with 'after' and 'order'.",
      "before",
    );
  }
  const query = validate(raw, inputItemsQuerySchema);
  const id = c.req.param("id") ?? "";
  const page = await deps.responses.inputItems(c.get("principal").orgId, id, {
    after: query.after,
    limit: query.limit,
    order: query.order,
  });
  if (page === undefined) throw notFound(id);
  return c.json({
    object: "list",
    data: page.items,
    first_id: page.items[0]?.id ?? null,
    last_id: page.items.at(-1)?.id ?? null,
    has_more: page.hasMore,
  });
}

/**
 * OpenAI's words for an id the organization has no (unexpired) response under; the code is Hearth's `not_found`
 * (every Hearth error has one; OpenAI sends null here).
 */
function notFound(id: string): NotFoundError {
  return new NotFoundError(`Response with id '${id}' not found.`);
}

/**
 * The query's single fields as sent, and each of `lists` as every value given (`include=a&include=b`, or
 * `include[]=a` as the official clients write arrays).
 */
function queryOf(c: Context<AppEnv>, lists: readonly string[]): Record<string, unknown> {
  const raw: Record<string, unknown> = { ...c.req.query() };
  for (const name of lists) {
    delete raw[`${name}[]`];
    const values = [...(c.req.queries(name) ?? []), ...(c.req.queries(`${name}[]`) ?? [])];
    if (values.length > 0) raw[name] = values;
    else delete raw[name];
  }
  return raw;
}
