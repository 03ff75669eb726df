// JSON Schema as OpenAI defines it: numeric bounds, formats, patterns, allOf, tuples, uniqueItems, strict and hint
// schemas. Grammars are read with a GBNF reader (llama.cpp parses them in the model tests): texts sampled from each
// grammar must satisfy the schema (checked with Ajv and ajv-formats), and texts outside it must be refused.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { seededRandom as seeded } from "../../../test/support/fuzz-requests.js";
import { Gbnf } from "../../../test/support/gbnf-matcher.js";
import { type CompiledSchema, compileJsonSchema } from "./compiled-schema.js";
import { GrammarBuilder } from "./gbnf.js";
import { JsonSchemaError, validateJson } from "./json-schema.js";

const ajv = new Ajv2020.default({ strict: false });
addFormats.default(ajv);

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function grammarOf(compiled: CompiledSchema): Gbnf {
  const g = new GrammarBuilder();
  return new Gbnf(g.build(g.schema(compiled, "answer")));
}

/** Samples texts the grammar admits; each must parse and satisfy the schema (Ajv) and Hearth's own check. */
function expectSamplesValid(schema: Record<string, unknown>, count = 200, strict = true): string[] {
  const compiled = compileJsonSchema(schema, { strict });
  const grammar = grammarOf(compiled);
  const validate = ajv.compile(schema);
  const random = seeded(7);
  const samples: string[] = [];
  for (let i = 0; i < count; i++) {
    const text = grammar.sample(random);
    const value: unknown = JSON.parse(text);
    expect(validate(value), `${text}: ${JSON.stringify(validate.errors)}`).toBe(true);
    expect(validateJson(compiled, value), text).toBeUndefined();
    samples.push(text);
  }
  // The shortest instance (budget steering) is admitted by the grammar and valid too.
  expect(grammar.accepts(compiled.minimal), compiled.minimal).toBe(true);
  expect(validate(JSON.parse(compiled.minimal)), compiled.minimal).toBe(true);
  return samples;
}

function expectAdmits(schema: Record<string, unknown>, accepted: string[], refused: string[]): void {
  const grammar = grammarOf(compileJsonSchema(schema));
  for (const text of accepted) expect(grammar.accepts(text), text).toBe(true);
  for (const text of refused) expect(grammar.accepts(text), text).toBe(false);
}

function errorOf(run: () => unknown): JsonSchemaError {
  try {
    run();
  } catch (error) {
    if (error instanceof JsonSchemaError) return error;
    throw error;
  }
  throw new Error("no error");
}

describe("numeric bounds by grammar", () => {
  const zodInt = { type: "integer", minimum: -MAX_SAFE, maximum: MAX_SAFE };

  it("zod's integer: every safe integer, 16 digits, and nothing past ±(2^53−1)", () => {
    expectAdmits(
      zodInt,
      ["0", "-1", "9007199254740991", "-9007199254740991", "1234567890123456", "9007199254740990"],
      ["9007199254740992", "-9007199254740992", "10000000000000000", "01", "-0", "1.5", "1e3"],
    );
    const samples = expectSamplesValid(zodInt);
    expect(samples.some((t) => t.replace("-", "").length === 16)).toBe(true);
    for (const text of samples) expect(Number.isSafeInteger(JSON.parse(text))).toBe(true);
    expect(compileJsonSchema(zodInt).minimal).toBe("0");
  });

  it("pydantic's ge=1, le=10 and gt/lt, on integers and numbers", () => {
    const ge1le10 = { type: "integer", minimum: 1, maximum: 10 };
    expectAdmits(ge1le10, ["1", "5", "10"], ["0", "11", "-1", "100"]);
    expect(compileJsonSchema(ge1le10).minimal).toBe("1");
    expectSamplesValid(ge1le10);
    const gt0 = { type: "number", exclusiveMinimum: 0 };
    expectAdmits(gt0, ["0.1", "1", "0.00001", "123.5"], ["0", "0.0", "-0.5", "-1"]);
    expect(compileJsonSchema(gt0).minimal).toBe("1");
    expectSamplesValid(gt0);
    const unit = { type: "number", minimum: 0, maximum: 1 };
    expectAdmits(unit, ["0", "1", "1.0", "0.5", "0.999"], ["1.01", "-0.1", "2"]);
    expectSamplesValid(unit);
    const frac = { type: "number", minimum: -2.5, exclusiveMaximum: 3.75 };
    expectAdmits(frac, ["-2.5", "3.7", "3.7499", "0", "-2"], ["3.75", "3.8", "-2.51", "4"]);
    expectSamplesValid(frac);
  });

  it("a minimum decides the shortest instance; an impossible range is refused", () => {
    expect(compileJsonSchema({ type: "integer", minimum: 5 }).minimal).toBe("5");
    expect(compileJsonSchema({ type: "integer", maximum: -20 }).minimal).toBe("-20");
    expect(compileJsonSchema({ type: "number", minimum: 0.25, maximum: 0.5 }).minimal).toBe("0.3");
    expect(compileJsonSchema({ type: "integer", minimum: 5, multipleOf: 4 }).minimal).toBe("8");
    expect(compileJsonSchema({ type: "number", multipleOf: 0.5, minimum: 0.2 }).minimal).toBe("1");
    expect(errorOf(() => compileJsonSchema({ type: "integer", minimum: 3, maximum: 2 })).path).toBe("#");
    expect(
      errorOf(() => compileJsonSchema({ type: "integer", exclusiveMinimum: 1, exclusiveMaximum: 2 })).message,
    ).toMatch(/No integer/);
  });

  it("bounds beyond what can be written", () => {
    expectSamplesValid({ type: "number", maximum: 1e300 }, 50);
    expectSamplesValid({ type: "integer", minimum: -1e300, maximum: 3 }, 50);
  });

  it("multipleOf within close bounds is enforced by grammar (a choice among the multiples)", () => {
    const five = { type: "integer", minimum: 0, maximum: 100, multipleOf: 5 };
    expectAdmits(five, ["0", "5", "100", "55"], ["3", "101", "105", "-5"]);
    expectSamplesValid(five, 100);
    const quarter = { type: "number", minimum: -1, maximum: 1, multipleOf: 0.25 };
    expectAdmits(quarter, ["-1", "-0.25", "0", "0.75", "1"], ["0.3", "1.25", "-0"]);
    expectSamplesValid(quarter, 100);
  });

  it("multipleOf is validated after generation otherwise", () => {
    const compiled = compileJsonSchema({ type: "integer", multipleOf: 3 });
    expect(validateJson(compiled, 9)).toBeUndefined();
    expect(validateJson(compiled, 10)).toMatch(/multiple of 3/);
    expect(validateJson(compileJsonSchema({ type: "number", multipleOf: 0.1 }), 0.3)).toBeUndefined();
  });
});

describe("formats by grammar", () => {
  it.each([
    [
      "date-time",
      ["2024-02-28T13:45:00Z", "1999-12-31T23:59:59.123+05:30"],
      ["2024-02-30T00:00:00Z", "2024-01-01 00:00:00Z", "2024-01-01T24:00:00Z"],
    ],
    ["date", ["2024-04-30", "0001-01-01"], ["2024-04-31", "2024-13-01", "24-01-01"]],
    ["time", ["00:00:00Z", "23:59:59.5-01:00"], ["24:00:00Z", "12:00:00"]],
    ["duration", ["P1D", "PT1H30M", "P1Y2M3DT4H5M6S", "P3W"], ["P", "PT", "1D", "P1H"]],
    ["email", ["a@b.co", "first.last+tag@mail.example.org"], ["a@b", "@b.co", "a b@c.de", "a@-b.co"]],
    ["hostname", ["localhost", "api.example.com", "a-b.c"], ["-a.com", "a..b", "a_b"]],
    ["ipv4", ["0.0.0.0", "192.168.1.255"], ["256.1.1.1", "1.2.3", "01.2.3.4"]],
    ["ipv6", ["::", "::1", "fe80::1:2", "2001:db8:0:0:0:0:2:1"], [":::", "1:2:3:4:5:6:7:8:9", "12345::"]],
    [
      "uuid",
      ["123e4567-e89b-12d3-a456-426614174000"],
      ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400"],
    ],
  ])("%s: valid values admitted, invalid ones refused, samples valid", (format, good, bad) => {
    const schema = { type: "string", format };
    expectAdmits(
      schema,
      good.map((v) => JSON.stringify(v)),
      bad.map((v) => JSON.stringify(v)),
    );
    expectSamplesValid(schema, 100);
  });
});

describe("patterns by grammar", () => {
  it.each([
    ["^[A-Z]{3}-\\d{2,4}$", ["ABC-12", "XYZ-1234"], ["abc-12", "ABC-1", "ABC-12345"]],
    ["^(cat|dog)s?$", ["cat", "dogs"], ["cow", "cats!"]],
    ["^\\+?[0-9 ]{3,12}$", ["+33 612", "123"], ["12", "+-123"]],
    ["^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$", ["a@b.cd"], ["a@b.c", "a@@b.cd"]],
    ["ab+c", ["abc", "xxabbbcyy"], ["ac", "abx"]],
    ['^"quoted"\\\\$', ['\\"quoted\\"\\\\'], ["quoted"]],
  ])("%s", (pattern, good, bad) => {
    const schema = { type: "string", pattern };
    const regex = new RegExp(pattern, "u");
    expectAdmits(
      schema,
      good.map((v) => (v.includes('\\"') ? `"${v}"` : JSON.stringify(v))),
      bad.map((v) => JSON.stringify(v)),
    );
    for (const text of expectSamplesValid(schema, 100)) expect(regex.test(JSON.parse(text))).toBe(true);
  });

  it("strict: a pattern outside the subset is a 400 naming its place; as a hint it is left out", () => {
    for (const pattern of ["(?=a)b", "(a)\\1", "\\bword", "a^b", "\\p{L}", "(a*)*", "(a|b?)+"]) {
      const schema = { type: "object", properties: { s: { type: "string", pattern } } };
      expect(errorOf(() => compileJsonSchema(schema)).path).toBe("#/properties/s/pattern");
      expect(compileJsonSchema(schema, { strict: false }).root.kind).toBe("object");
    }
  });

  it("zod's format beside its own regex: a regex in the subset is enforced, one outside it stands behind the format", () => {
    const zodEmail = {
      type: "string",
      format: "email",
      pattern:
        "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
    };
    const regex = new RegExp(zodEmail.pattern);
    for (const text of expectSamplesValid(zodEmail, 50)) expect(JSON.parse(text)).toMatch(/@/);
    expect(regex.test(JSON.parse(compileJsonSchema(zodEmail).minimal))).toBe(true);
    const zodUuid = {
      type: "string",
      format: "uuid",
      pattern:
        "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$",
    };
    for (const text of expectSamplesValid(zodUuid, 50))
      expect(new RegExp(zodUuid.pattern).test(JSON.parse(text))).toBe(true);
  });

  it("a pattern of one repeated class takes minLength and maxLength into the grammar", () => {
    const schema = { type: "string", pattern: "^[a-z0-9_]+$", minLength: 3, maxLength: 8 };
    expectAdmits(schema, ['"abc"', '"abcdefgh"'], ['"ab"', '"abcdefghi"', '"AB"']);
    expect(compileJsonSchema(schema).minimal).toBe('"aaa"');
    expectSamplesValid(schema, 100);
  });

  it("the check after generation never backtracks: a nested quantifier on a long value is quick", () => {
    const compiled = compileJsonSchema({ type: "string", pattern: "^(a+)+$" });
    const started = performance.now();
    expect(validateJson(compiled, `${"a".repeat(5000)}b`)).toMatch(/pattern/);
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe("allOf, $ref siblings, tuples, uniqueItems", () => {
  const defs = {
    Point: {
      type: "object",
      properties: { x: { type: "integer", minimum: 0 }, y: { type: "integer" } },
      required: ["x", "y"],
      additionalProperties: false,
    },
  };

  it("pydantic's allOf wrapper and $ref with a description are references", () => {
    const schema = {
      type: "object",
      properties: {
        a: { allOf: [{ $ref: "#/$defs/Point" }], description: "where" },
        b: { $ref: "#/$defs/Point", description: "there", default: null },
      },
      required: ["a", "b"],
      $defs: defs,
    };
    const compiled = compileJsonSchema(schema);
    const root = compiled.root as Extract<typeof compiled.root, { kind: "object" }>;
    expect(root.properties.map((p) => p.schema.kind)).toEqual(["ref", "ref"]);
    expectSamplesValid(schema, 50);
  });

  it("object schemas merge: properties, required and bounds", () => {
    const schema = {
      allOf: [
        { type: "object", properties: { n: { type: "integer", minimum: 0 } }, required: ["n"] },
        {
          type: "object",
          properties: { n: { maximum: 5 }, s: { type: "string", format: "date" } },
          required: ["s"],
        },
      ],
    };
    expectSamplesValid(schema, 100);
    expect(compileJsonSchema(schema).minimal).toBe('{"n":0,"s":"2000-01-01"}');
    expect(
      errorOf(() => compileJsonSchema({ allOf: [{ type: "string" }, { type: "integer" }] })).message,
    ).toMatch(/cannot be merged/);
  });

  it("prefixItems: a tuple, with items after it or none (pydantic's tuple[int, str])", () => {
    const pair = {
      type: "array",
      prefixItems: [
        { type: "integer", minimum: 1, maximum: 9 },
        { type: "string", format: "uuid" },
      ],
      minItems: 2,
      maxItems: 2,
    };
    expectAdmits(pair, ['[1,"123e4567-e89b-12d3-a456-426614174000"]'], ["[1]", '["a",1]', '[1,"x",2]']);
    expectSamplesValid(pair, 100);
    const open = { type: "array", prefixItems: [{ type: "boolean" }], items: { type: "null" }, minItems: 0 };
    expectAdmits(open, ["[]", "[true]", "[false,null,null]"], ["[null]", "[true,true]"]);
    expectSamplesValid(open, 100);
    const draft7 = { type: "array", items: [{ const: 1 }], additionalItems: false };
    expectAdmits(draft7, ["[]", "[1]"], ["[1,1]", "[2]"]);
  });

  it("uniqueItems is validated after generation", () => {
    const compiled = compileJsonSchema({ type: "array", items: { type: "integer" }, uniqueItems: true });
    expect(validateJson(compiled, [1, 2, 3])).toBeUndefined();
    expect(validateJson(compiled, [1, 2, 1])).toMatch(/not unique/);
    const objects = compileJsonSchema({ type: "array", uniqueItems: true });
    expect(
      validateJson(objects, [
        { a: 1, b: 2 },
        { b: 2, a: 1 },
      ]),
    ).toMatch(/not unique/);
  });
});

describe("zod 4's own JSON Schema (what openai-node, the AI SDK and LangChain JS send)", () => {
  it("compiles strict, and every sampled instance parses with the zod schema itself", () => {
    const model = z.object({
      id: z.int(),
      price: z.number().positive(),
      stars: z.int().min(1).max(10),
      email: z.email(),
      ref: z.uuid(),
      at: z.iso.datetime(),
      day: z.iso.date(),
      clock: z.iso.time(),
      took: z.iso.duration(),
      ip: z.ipv4(),
      ip6: z.ipv6(),
      tags: z.array(z.string().max(5)).max(3),
      pair: z.tuple([z.int(), z.string().max(4)]),
      kind: z.enum(["a", "b"]),
      note: z.string().max(6).nullable(),
      code: z.string().regex(/^[A-Z]{2}\d{3}$/),
    });
    const schema = z.toJSONSchema(model) as Record<string, unknown>;
    const compiled = compileJsonSchema(schema, { strict: true });
    const grammar = grammarOf(compiled);
    const random = seeded(11);
    for (let i = 0; i < 100; i++) {
      const text = grammar.sample(random);
      const result = model.safeParse(JSON.parse(text));
      expect(result.success, `${text}: ${JSON.stringify(result.error?.issues)}`).toBe(true);
    }
    expect(model.safeParse(JSON.parse(compiled.minimal)).success, compiled.minimal).toBe(true);
  });
});

describe("pydantic 2's own JSON Schema (what openai-python's parse, instructor and pydantic-ai send)", () => {
  it("compiles strict; sampled instances satisfy it (Ajv), bounds, formats, pattern, tuple and $refs included", () => {
    // Review.model_json_schema() of pydantic 2.13: Field(ge, le, gt), datetime, date, UUID, a constr pattern,
    // tuple[int, str], set[str], a nested model by $ref, Optional of it, Literal, timedelta.
    const schema = JSON.parse(
      readFileSync(new URL("../fixtures/pydantic-review.schema.json", import.meta.url), "utf8"),
    ) as Record<string, unknown>;
    const { tags: _unique, ...properties } = schema.properties as Record<string, unknown>;
    const required = (schema.required as string[]).filter((name) => name !== "tags");
    // uniqueItems is validated after generation, not sampled around: checked apart above.
    expectSamplesValid({ ...schema, properties, required }, 150);
  });
});

describe("strict and hint schemas", () => {
  const hinted = {
    type: "object",
    properties: {
      kind: { type: "string", format: "uri", not: { const: "x" } },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then, sent as a hint
      n: { type: "integer", minimum: 1, if: { minimum: 5 }, then: { multipleOf: 5 } },
      tags: { type: "array", contains: { const: "a" }, items: { type: "string" } },
    },
    patternProperties: { "^x-": { type: "string" } },
    dependentRequired: { kind: ["n"] },
    required: ["n", "extra"],
    minProperties: 1,
  };

  it("not strict: any valid JSON Schema is accepted, the enforceable part enforced", () => {
    const compiled = compileJsonSchema(hinted, { strict: false });
    expect(compiled.minimal).toBe('{"n":1,"extra":null}');
    const grammar = grammarOf(compiled);
    expect(grammar.accepts('{"n": 1, "extra": 2}')).toBe(true);
    expect(grammar.accepts('{"n": 0, "extra": 2}')).toBe(false);
    // Strict refuses the first keyword it cannot enforce, naming its place.
    expect(errorOf(() => compileJsonSchema(hinted)).path).toBe("#/patternProperties");
  });

  it("a document that is not JSON Schema is refused in either mode, naming the place", () => {
    for (const strict of [true, false]) {
      expect(errorOf(() => compileJsonSchema({ type: 5 }, { strict })).path).toBe("#/type");
      expect(errorOf(() => compileJsonSchema({ type: "object", required: "x" }, { strict })).path).toBe(
        "#/required",
      );
      expect(errorOf(() => compileJsonSchema({ properties: { a: { minimum: "a" } } }, { strict })).path).toBe(
        "#/properties/a/minimum",
      );
      expect(errorOf(() => compileJsonSchema({ not: { type: 7 } }, { strict: false })).path).toBe(
        "#/not/type",
      );
    }
  });

  it("a document nested past the bound is refused before the meta-schemas recurse", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 5000; i++) deep = { not: deep };
    expect(
      errorOf(() => compileJsonSchema({ type: "object", not: deep }, { strict: false })).message,
    ).toMatch(/nests deeper/);
  });

  it("strict and hint compilations of one text are cached apart", () => {
    const schema = { type: "string", format: "uri" };
    expect(() => compileJsonSchema(schema)).toThrow(JsonSchemaError);
    expect(compileJsonSchema(schema, { strict: false }).root).toEqual({
      kind: "string",
      minLength: 0,
      maxLength: undefined,
    });
  });
});
