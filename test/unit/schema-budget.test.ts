// Adversarial schemas through the HTTP API: a 400 naming the limit and the schema's place, before the engine is asked,
// and the configured budget (server.schemaBudget) is the one applied.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestLimitsSchema } from "../../src/config/schema.js";
import {
  ambiguousRecursion,
  defsDoubling,
  hugeEnum,
  manyOptional,
  minItemsProduct,
  nestedUnions,
} from "../support/adversarial-schemas.js";
import { DEFAULT_REPLY, FAKE_MODEL, type FakeEngine } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const ask = { model: FAKE_MODEL, messages: [{ role: "user", content: "Hi." }] };
const responseFormat = (schema: unknown) => ({
  response_format: { type: "json_schema", json_schema: { name: "answer", schema } },
});
const tool = (name: string, parameters: unknown) => ({ type: "function", function: { name, parameters } });

describe("schema budget over HTTP", () => {
  let harness: TestApp<FakeEngine>;
  let small: TestApp<FakeEngine>;

  beforeAll(async () => {
    // The request's byte cap (server.requestLimits.maxSchemaBytes) refuses most of these inputs before they reach
    // the compiler; it is raised here so the compiler's own budget is what answers.
    const requestLimits = requestLimitsSchema.parse({ maxSchemaBytes: 64 << 20 });
    [harness, small] = await Promise.all([
      startTestApp({ server: { requestLimits } }),
      startTestApp({ server: { requestLimits, schemaBudget: { alternatives: 10 } } }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([harness?.close(), small?.close()]);
  });

  async function refused(app: TestApp<FakeEngine>, body: unknown): Promise<ErrorBody["error"]> {
    const response = await app.chat(body);
    expect(response.status).toBe(400);
    return ((await response.json()) as ErrorBody).error;
  }

  it.each([
    { shape: "nested unions", schema: () => nestedUnions(8, 8), limit: "alternatives" },
    { shape: "definitions doubling", schema: () => defsDoubling(30), limit: "minimalLength" },
    { shape: "minItems products", schema: () => minItemsProduct(100, 3), limit: "minimalLength" },
    { shape: "many optional properties", schema: () => manyOptional(1000), limit: "alternatives" },
    { shape: "a huge enum", schema: () => hugeEnum(100000), limit: "nodes" },
  ])("response_format with $shape: 400 naming the limit '$limit'", async ({ schema, limit }) => {
    const error = await refused(harness, { ...ask, ...responseFormat(schema()) });
    expect(error).toMatchObject({
      type: "invalid_request_error",
      code: "schema_too_complex",
      param: "response_format.json_schema.schema",
    });
    expect(error.message).toContain(`limit '${limit}'`);
  });

  it("refuses a recursion through alike options, in response_format and in tools", async () => {
    const inFormat = await refused(harness, { ...ask, ...responseFormat(ambiguousRecursion(2)) });
    expect(inFormat).toMatchObject({
      type: "invalid_request_error",
      code: "schema_too_complex",
      param: "response_format.json_schema.schema",
    });
    expect(inFormat.message).toContain("options 0 and 1 of a union both lead back into it");
    expect(inFormat.message).toContain("(#/$defs/node)");
    const tools = [
      tool("a", manyOptional(3)),
      tool("b", {
        type: "object",
        properties: { tree: { $ref: "#/$defs/node" } },
        required: ["tree"],
        $defs: ambiguousRecursion(3).$defs,
      }),
    ];
    const inTools = await refused(harness, { ...ask, tools });
    expect(inTools).toMatchObject({ code: "schema_too_complex", param: "tools[1].function.parameters" });
  });

  it("names the tool whose parameters ran the budget out", async () => {
    const tools = [
      tool("a", manyOptional(3)),
      tool("b", manyOptional(3)),
      tool("c", { type: "object", properties: { e: hugeEnum(100000) } }),
    ];
    const error = await refused(harness, { ...ask, tools });
    expect(error).toMatchObject({ code: "schema_too_complex", param: "tools[2].function.parameters" });
    expect(error.message).toContain("limit 'nodes'");
  });

  it("sums the request's schemas: tools that fit alone are refused together, at the one that ran out", async () => {
    // 190 required properties each: ten tools make 1900 properties, the eleventh 2090 (over the default 2000).
    const required = { ...manyOptional(190), required: Object.keys(manyOptional(190).properties as object) };
    const tools = Array.from({ length: 12 }, (_, i) => tool(`f${i}`, required));
    const error = await refused(harness, { ...ask, tools });
    expect(error).toMatchObject({ code: "schema_too_complex", param: "tools[10].function.parameters" });
    expect(error.message).toContain("limit 'properties'");
  });

  it("applies the configured budget", async () => {
    const schema = hugeEnum(20);
    const error = await refused(small, { ...ask, ...responseFormat(schema) });
    expect(error.message).toContain("limit 'alternatives' (at most 10");
    const accepted = await harness.chat({ ...ask, ...responseFormat(schema) });
    expect(accepted.status).toBe(200);
  });

  it("still answers within the budget", async () => {
    const response = await harness.chat({ ...ask, tools: [tool("f", manyOptional(150))] });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]?.message.content).toBe(DEFAULT_REPLY);
  });
});
