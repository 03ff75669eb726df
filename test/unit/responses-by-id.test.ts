// GET/DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items through the whole app (real API keys,
// another organization's key, the memory store): OpenAI's shapes, its 404 for what is not the caller's, and a 400
// naming each bad query parameter.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryResponsesStore } from "../../src/responses/memory-store.js";
import type { StoredResponse } from "../../src/responses/types.js";
import { StoreUnavailableError } from "../../src/store/store-status.js";
import { storedResponse } from "../support/responses-store-contract.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

describe("stored responses by id", () => {
  const clock = { now: new Date() };
  const store = new MemoryResponsesStore({ now: () => clock.now });
  let harness: TestApp<never>;
  let orgId: string;
  let otherKey: string;
  let otherOrgId: string;

  beforeAll(async () => {
    harness = (await startTestApp({ responses: store })) as unknown as TestApp<never>;
    const principal = await harness.services.tenancy.keys.verify(harness.apiKey);
    orgId = principal?.orgId ?? "";
    const other = await harness.services.tenancy.orgs.create("elsewhere", []);
    otherOrgId = other.id;
    otherKey = (await harness.services.tenancy.keys.create("elsewhere")).key;
  });

  afterAll(async () => {
    await harness?.close();
  });

  const request = (method: string, path: string, key = harness.apiKey) =>
    Promise.resolve(harness.app.request(path, { method, headers: { authorization: `Bearer ${key}` } }));

  async function saved(
    options: Parameters<typeof storedResponse>[2] = {},
    org = orgId,
  ): Promise<StoredResponse> {
    const record = storedResponse(org, clock, options);
    await store.save(record);
    return record;
  }

  /** A JSON body as the tests read it: OpenAI's list object or its error object. */
  interface Body {
    data: unknown[];
    error: { message: string; param: string | null; type: string; code: string | null };
  }
  const json = async (res: Response) => (await res.json()) as Body;

  const notFound = (id: string) => ({
    error: {
      message: `Response with id '${id}' not found.`,
      type: "invalid_request_error",
      param: null,
      code: "not_found",
    },
  });

  it("GET gives the stored response object as it was sent", async () => {
    const record = await saved();
    const res = await request("GET", `/v1/responses/${record.id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBeTruthy();
    expect(await res.json()).toEqual(record.response);
  });

  it("another organization's response, an unknown id and an expired one are the same 404", async () => {
    const mine = await saved();
    const theirs = await saved({}, otherOrgId);
    const expiring = await saved({ ttlMs: 1000 });
    clock.now = new Date(clock.now.getTime() + 2000);
    for (const [key, id] of [
      [otherKey, mine.id],
      [harness.apiKey, theirs.id],
      [harness.apiKey, "resp_unknown"],
      [harness.apiKey, expiring.id],
    ] as const) {
      for (const [method, path] of [
        ["GET", `/v1/responses/${id}`],
        ["DELETE", `/v1/responses/${id}`],
        ["GET", `/v1/responses/${id}/input_items`],
      ] as const) {
        const res = await request(method, path, key);
        expect([method, path, res.status]).toEqual([method, path, 404]);
        expect(await res.json()).toEqual(notFound(id));
      }
    }
    // Their DELETE changed nothing.
    expect((await request("GET", `/v1/responses/${mine.id}`)).status).toBe(200);
    expect((await request("GET", `/v1/responses/${theirs.id}`, otherKey)).status).toBe(200);
  });

  it("DELETE answers OpenAI's deletion object once, then 404", async () => {
    const record = await saved();
    const res = await request("DELETE", `/v1/responses/${record.id}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: record.id, object: "response", deleted: true });
    expect((await request("GET", `/v1/responses/${record.id}`)).status).toBe(404);
    expect(await json(await request("DELETE", `/v1/responses/${record.id}`))).toEqual(notFound(record.id));
  });

  it("input_items lists as OpenAI does: newest first by default, 20 per page, first_id, last_id, has_more", async () => {
    const record = await saved({ inputs: 25 });
    const item = (n: number) => `msg_${record.id}_in${n}`;
    const first = await json(await request("GET", `/v1/responses/${record.id}/input_items`));
    expect(first).toMatchObject({ object: "list", first_id: item(25), last_id: item(6), has_more: true });
    expect(first.data).toHaveLength(20);
    expect(first.data[0]).toEqual(record.inputItems[24]);
    const next = await json(
      await request("GET", `/v1/responses/${record.id}/input_items?after=${item(6)}&limit=20`),
    );
    expect(next).toMatchObject({ first_id: item(5), last_id: item(1), has_more: false });
    expect(next.data).toHaveLength(5);
    const asc = await json(
      await request(
        "GET",
        `/v1/responses/${record.id}/input_items?order=asc&limit=2&after=${item(3)}&include[]=message.input_image.image_url&unknown=1`,
      ),
    );
    expect(asc).toEqual({
      object: "list",
      data: [record.inputItems[3], record.inputItems[4]],
      first_id: item(4),
      last_id: item(5),
      has_more: true,
    });
    const past = await json(await request("GET", `/v1/responses/${record.id}/input_items?after=msg_gone`));
    expect(past).toEqual({ object: "list", data: [], first_id: null, last_id: null, has_more: false });
  });

  it("a bad query parameter is a 400 naming it", async () => {
    const record = await saved();
    for (const [query, param] of [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["limit=abc", "limit"],
      ["limit=2.5", "limit"],
      ["order=newest", "order"],
      ["after=", "after"],
      ["before=msg_1", "before"],
    ] as const) {
      const res = await request("GET", `/v1/responses/${record.id}/input_items?${query}`);
      const body = await json(res);
      expect([query, res.status, body.error.param, body.error.type]).toEqual([
        query,
        400,
        param,
        "invalid_request_error",
      ]);
      expect(body.error.message).toContain(`'${param}'`);
    }
    const stream = await request("GET", `/v1/responses/${record.id}?stream=true`);
    expect([stream.status, (await json(stream)).error.param]).toEqual([400, "stream"]);
    const ok = await request(
      "GET",
      `/v1/responses/${record.id}?stream=false&include=reasoning.encrypted_content`,
    );
    expect(ok.status).toBe(200);
  });

  it("another method on these paths is a 405 naming it", async () => {
    for (const [method, path] of [
      ["POST", "/v1/responses/resp_1"],
      ["PUT", "/v1/responses/resp_1"],
      ["PATCH", "/v1/responses/resp_1/input_items"],
      ["DELETE", "/v1/responses/resp_1/input_items"],
    ] as const) {
      const res = await request(method, path);
      expect([method, path, res.status]).toEqual([method, path, 405]);
      expect((await json(res)).error).toMatchObject({
        code: "method_not_allowed",
        message: `Method ${method} is not allowed on ${path}.`,
      });
    }
  });

  it("needs a valid API key, like every /v1 route", async () => {
    const record = await saved();
    for (const [method, path] of [
      ["GET", `/v1/responses/${record.id}`],
      ["DELETE", `/v1/responses/${record.id}`],
      ["GET", `/v1/responses/${record.id}/input_items`],
    ] as const) {
      const res = await request(method, path, "sk-wrong");
      expect([method, path, res.status]).toEqual([method, path, 401]);
      expect((await json(res)).error.code).toBe("invalid_api_key");
    }
    expect(store.size).toBeGreaterThan(0);
  });

  it("a store that cannot answer is a 503 to retry, not a 500; any other failure stays a 500", async () => {
    const failing = store.get;
    store.get = async () => {
      throw new StoreUnavailableError("stored responses cannot be read: the store is unavailable");
    };
    try {
      const res = await request("GET", "/v1/responses/resp_any");
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("2");
      expect((await json(res)).error).toMatchObject({ type: "server_error", code: "store_unavailable" });
      store.get = async () => {
        throw new TypeError("a bug");
      };
      const bug = await request("GET", "/v1/responses/resp_any");
      expect(bug.status).toBe(500);
    } finally {
      store.get = failing;
    }
  });
});
