import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../store/open-store.js";
import { createTenancy, type Tenancy } from "../../tenancy/tenancy.js";
import type { AppEnv } from "../env.js";
import { mapDomainError } from "../errors/domain-errors.js";
import { apiErrorResponse } from "../errors/error-response.js";
import { bearerCredential, MISSING_API_KEY_MESSAGE, requireApiKey } from "./require-api-key.js";

let dir: string;
let store: Store;
let tenancy: Tenancy;
let clock = Date.now();
let app: Hono<AppEnv>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hearth-auth-"));
  store = await openStore({ dataDir: dir });
  tenancy = createTenancy(store.db, {
    keySecret: Buffer.alloc(32, 1),
    modelIds: ["m"],
    now: () => clock,
  });
  await tenancy.orgs.create("acme", ["m"]);
  app = new Hono<AppEnv>();
  app.use("/v1/*", requireApiKey(tenancy));
  app.get("/v1/whoami", (c) => c.json(c.get("principal")));
  app.onError((err, c) => apiErrorResponse(c, mapDomainError(err)));
});

afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function call(authorization?: string) {
  const res = await app.request(
    "/v1/whoami",
    authorization === undefined ? {} : { headers: { authorization } },
  );
  return {
    status: res.status,
    body: (await res.json()) as Record<string, unknown> & { error?: Record<string, unknown> },
  };
}

function expectInvalidKey(result: Awaited<ReturnType<typeof call>>) {
  expect(result.status).toBe(401);
  expect(result.body.error).toMatchObject({
    type: "invalid_request_error",
    code: "invalid_api_key",
    param: null,
  });
}

describe("requireApiKey", () => {
  it("passes a valid key and sets the principal", async () => {
    const key = await tenancy.keys.create("acme");
    const result = await call(`Bearer ${key.key}`);
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ orgId: key.orgId, orgName: "acme", keyId: key.id, rpm: null, tpm: null });
    expect((await call(`bearer   ${key.key}  `)).status).toBe(200);
  });

  it("answers 401 with OpenAI's message when no key is sent", async () => {
    const result = await call();
    expectInvalidKey(result);
    expect(result.body.error?.message).toBe(MISSING_API_KEY_MESSAGE);
    expect(MISSING_API_KEY_MESSAGE).toMatch(/^You didn't provide an API key\./);
    expectInvalidKey(await call(""));
    expectInvalidKey(await call("Bearer"));
    expectInvalidKey(await call("Bearer   "));
  });

  it("refuses other schemes such as Basic, even carrying a valid key", async () => {
    const key = await tenancy.keys.create("acme");
    const result = await call(`Basic ${Buffer.from(`:${key.key}`).toString("base64")}`);
    expectInvalidKey(result);
    expect(result.body.error?.message).toBe(MISSING_API_KEY_MESSAGE);
    expectInvalidKey(await call(key.key));
  });

  it("refuses malformed and unknown keys, masking what was sent", async () => {
    const malformed = await call("Bearer sk-abcdefghijklmnop-not-a-real-key-wxyz");
    expectInvalidKey(malformed);
    const message = String(malformed.body.error?.message);
    expect(message).toMatch(/^Incorrect API key provided: sk-ab\*+wxyz\./);
    expect(message).not.toContain("not-a-real");

    const unknown = `sk-${"Z".repeat(39)}wxyz`;
    const result = await call(`Bearer ${unknown}`);
    expectInvalidKey(result);
    expect(result.body.error?.message).not.toContain("Z".repeat(10));
    expectInvalidKey(await call("Bearer two words"));
  });

  it("refuses a revoked key", async () => {
    const key = await tenancy.keys.create("acme");
    expect((await call(`Bearer ${key.key}`)).status).toBe(200);
    await tenancy.keys.revoke(key.id);
    expectInvalidKey(await call(`Bearer ${key.key}`));
  });

  it("refuses an expired key", async () => {
    const key = await tenancy.keys.create("acme", { expiresAt: new Date(clock + 60_000) });
    expect((await call(`Bearer ${key.key}`)).status).toBe(200);
    clock += 60_000;
    expectInvalidKey(await call(`Bearer ${key.key}`));
  });
});

describe("bearerCredential", () => {
  it("extracts the credential of the Bearer scheme only", () => {
    expect(bearerCredential(undefined)).toBeUndefined();
    expect(bearerCredential("Bearer abc")).toBe("abc");
    expect(bearerCredential("BEARER abc ")).toBe("abc");
    expect(bearerCredential("Bearerabc")).toBeUndefined();
    expect(bearerCredential("Basic abc")).toBeUndefined();
    expect(bearerCredential("Bearer a b")).toBe("a b");
  });
});
