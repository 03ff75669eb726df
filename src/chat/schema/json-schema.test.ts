import { describe, expect, it } from "vitest";
import { compileJsonSchema } from "./compiled-schema.js";
import { GrammarBuilder } from "./gbnf.js";
import { JsonSchemaError, validateJson } from "./json-schema.js";

const person = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 5 },
    age: { type: ["integer", "null"] },
    tags: { type: "array", items: { enum: ["a", "b"] }, minItems: 1, maxItems: 2 },
    pet: { $ref: "#/$defs/pet" },
  },
  required: ["name", "tags"],
  additionalProperties: false,
  $defs: { pet: { anyOf: [{ const: "cat" }, { type: "object", properties: { kind: { type: "string" } } }] } },
};

describe("compileJsonSchema", () => {
  it.each([
    [{ type: "string", pattern: "(?=x)" }, "pattern", "#/pattern"],
    [
      { type: "object", properties: { n: { type: "number", not: { const: 0 } } } },
      "not",
      "#/properties/n/not",
    ],
    [{ allOf: [] }, "allOf", "#/allOf"],
    [{ type: "string", format: "uri" }, "format", "#/format"],
    [{ type: "object", patternProperties: { x: {} } }, "patternProperties", "#/patternProperties"],
  ])("strict: names a keyword it cannot enforce: %j", (schema, keyword, path) => {
    const error = (() => {
      try {
        compileJsonSchema(schema);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(JsonSchemaError);
    expect((error as JsonSchemaError).message).toContain(`'${keyword}'`);
    expect((error as JsonSchemaError).path).toBe(path);
  });

  it("rejects refs outside $defs, required names not declared, bounds beyond the limits, loops without a base", () => {
    expect(() => compileJsonSchema({ $ref: "http://x" })).toThrow(JsonSchemaError);
    expect(() => compileJsonSchema({ type: "object", required: ["a"] })).toThrow(/not declared/);
    expect(() => compileJsonSchema({ type: "string", maxLength: 100000 })).toThrow(/At most/);
    const loop = {
      $ref: "#/$defs/a",
      $defs: { a: { type: "object", properties: { a: { $ref: "#/$defs/a" } }, required: ["a"] } },
    };
    expect(() => compileJsonSchema(loop)).toThrow(/no finite instance/);
  });

  it("validates instances of the subset", () => {
    const compiled = compileJsonSchema(person);
    expect(validateJson(compiled, { name: "Ana", tags: ["a"], age: null, pet: "cat" })).toBeUndefined();
    expect(validateJson(compiled, { name: "Ana", tags: ["a"], pet: { kind: "dog" } })).toBeUndefined();
    expect(validateJson(compiled, { name: "", tags: ["a"] })).toMatch(/shorter/);
    expect(validateJson(compiled, { name: "Ana", tags: [] })).toMatch(/fewer/);
    expect(validateJson(compiled, { name: "Ana", tags: ["c"] })).toMatch(/allowed values/);
    expect(validateJson(compiled, { name: "Ana", tags: ["a"], age: 1.5 })).toMatch(/\$\.age/);
    expect(validateJson(compiled, { name: "Ana", tags: ["a"], x: 1 })).toMatch(/unexpected property 'x'/);
    expect(validateJson(compiled, { tags: ["a"] })).toMatch(/missing required property 'name'/);
  });

  it("finds the shortest instance (the budget a closed answer needs)", () => {
    const minimal = compileJsonSchema(person).minimal;
    expect(minimal).toBe('{"name":"a","tags":["a"]}');
    expect(validateJson(compileJsonSchema(person), JSON.parse(minimal ?? ""))).toBeUndefined();
  });
});

describe("GrammarBuilder", () => {
  it("writes declared properties in order, optional ones optional, no exponent and bounded whitespace", () => {
    const g = new GrammarBuilder();
    const text = g.build(g.schema(compileJsonSchema(person), "answer"));
    expect(text).toMatch(/^root ::= answer-root$/m);
    expect(text).toContain('"\\"name\\"" ":" ws');
    expect(text).toContain("char{1,5}");
    expect(text).toMatch(/^ws ::= \( " " \| "\\n" \[ \]\{0,16\} \)\?$/m);
    expect(text).not.toMatch(/[eE]"?\s*\[?[+-]/); // no exponent part in numbers
    expect(text).toMatch(/^integer ::= "-"\? \( "0" \| \[1-9\] \[0-9\]\{0,14\} \)$/m);
  });
});
