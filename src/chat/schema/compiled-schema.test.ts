import { describe, expect, it } from "vitest";
import {
  deepNesting,
  defsDag,
  defsDoubling,
  hugeEnum,
  longPattern,
  manyFormats,
  manyLengths,
  manyOptional,
  manyPatterns,
  manyRanges,
  minItemsProduct,
  nestedUnions,
} from "../../../test/support/adversarial-schemas.js";
import { planGeneration, planPrompt } from "../output/plan.js";
import type { TemplateCapabilities } from "../template/tool-format.js";
import { BudgetMeter, SchemaBudgetError, type SchemaLimit, schemaBudget } from "./budget.js";
import { type CompiledSchema, compileJsonSchema } from "./compiled-schema.js";
import { GrammarBuilder } from "./gbnf.js";
import { JsonSchemaError, validateJson } from "./json-schema.js";

/** A budget that refuses nothing: the tests below measure how output grows, not where it is cut off. */
const UNLIMITED = schemaBudget({
  nodes: 1e9,
  properties: 1e9,
  alternatives: Number.POSITIVE_INFINITY,
  grammarBytes: 1e12,
  repetitions: 1e9,
  minimalLength: 1e9,
});

function compile(schema: unknown, budget = UNLIMITED): CompiledSchema {
  return compileJsonSchema(schema, { meter: new BudgetMeter(budget) });
}

function grammarBytes(compiled: CompiledSchema): number {
  const g = new GrammarBuilder();
  return g.build(g.schema(compiled, "answer")).length;
}

/** The limit a schema is refused with, or "accepted". */
function refusal(schema: unknown, budget = schemaBudget()): SchemaLimit | "accepted" {
  try {
    compile(schema, budget);
    return "accepted";
  } catch (error) {
    if (error instanceof SchemaBudgetError) return error.limit;
    throw error;
  }
}

describe("schema compilation grows linearly with the schema", () => {
  it("nested unions sharing their siblings: nodes and grammar grow with depth, not width^depth", () => {
    const small = compile(nestedUnions(4, 4));
    const large = compile(nestedUnions(4, 8));
    // width^depth would be 256 times more; twice the levels is at most about twice the work.
    expect(large.cost.nodes).toBeLessThanOrEqual(2.5 * small.cost.nodes);
    expect(grammarBytes(large)).toBeLessThanOrEqual(2.5 * grammarBytes(small));
  });

  it("a DAG of $defs: the shortest instance is computed once per definition, not once per path", () => {
    // 2^40 paths: without memoisation this never finishes.
    const compiled = compile(defsDag(40));
    expect(compiled.minimal).toBe(`${"[".repeat(39)}0${"]".repeat(39)}`);
    const half = compile(defsDag(20));
    expect(compiled.cost.nodes).toBeLessThanOrEqual(2.5 * half.cost.nodes);
    expect(grammarBytes(compiled)).toBeLessThanOrEqual(2.5 * grammarBytes(half));
  });

  it("an object of optional properties: grammar text linear in the number of properties", () => {
    const p100 = grammarBytes(compile(manyOptional(100)));
    const p400 = grammarBytes(compile(manyOptional(400)));
    // Inlining every later property into each rule made this 16x; named suffix rules make it 4x.
    expect(p400).toBeLessThanOrEqual(4.5 * p100);
  });

  it("validation of a value against nested unions checks each (subschema, value) once", () => {
    const compiled = compile(nestedUnions(4, 12));
    let value: unknown = 1; // not a string: every option fails, so every path would be explored
    for (let level = 0; level < 12; level++) value = [value];
    expect(validateJson(compiled, value)).toMatch(/expected a string|none of the options/);
  });

  it("minItems products: the shortest instance is sized as numbers first, so the cap is reached without building it", () => {
    expect(compile(minItemsProduct(3, 3)).minimal).toBe(
      `[${Array(3)
        .fill(`[${Array(3).fill("[0,0,0]").join(",")}]`)
        .join(",")}]`,
    );
    expect(refusal(minItemsProduct(100, 8))).toBe("minimalLength");
  });
});

describe("the schema budget", () => {
  it.each([
    ["nested unions of width 8, depth 8", nestedUnions(8, 8), "alternatives"],
    ["a $defs DAG whose unions multiply", defsDag(24), "alternatives"],
    ["definitions doubling 30 times", defsDoubling(30), "minimalLength"],
    ["arrays of minItems 100, 3 deep", minItemsProduct(100, 3), "minimalLength"],
    ["1000 optional properties", manyOptional(1000), "alternatives"],
    ["5000 properties", manyOptional(5000), "properties"],
    ["an enum of 4000", hugeEnum(4000), "alternatives"],
    ["an enum of 100000", hugeEnum(100000), "nodes"],
    ["100 distinct maxLengths near 1000", manyLengths(100), "repetitions"],
    ["200 integer and 200 decimal ranges", manyRanges(200), "repetitions"],
    ["200 distinct patterns", manyPatterns(200), "repetitions"],
  ])("refuses %s naming the limit", (_, schema, limit) => {
    expect(refusal(schema)).toBe(limit);
  });

  it("accepts ordinary large schemas", () => {
    for (const schema of [
      manyOptional(150),
      hugeEnum(1000),
      deepNesting(32),
      defsDoubling(12),
      nestedUnions(30, 2),
      manyRanges(20),
      manyPatterns(20),
      longPattern(100),
      manyFormats(20),
    ]) {
      expect(refusal(schema)).toBe("accepted");
    }
  });

  it("names the grammar size limit when the text is over it", () => {
    expect(refusal(manyOptional(150), schemaBudget({ grammarBytes: 4096 }))).toBe("grammarBytes");
  });

  it("sums one request's schemas: each fits, together they do not", () => {
    const meter = new BudgetMeter(schemaBudget({ properties: 150 }));
    compileJsonSchema(manyOptional(100), { meter });
    // A cache hit is charged like a compilation.
    expect(() => compileJsonSchema(manyOptional(100), { meter })).toThrow(SchemaBudgetError);
  });

  it("keeps the depth bound for a shared subschema reached deeper", () => {
    expect(() => compile(deepNesting(33))).toThrow(JsonSchemaError);
  });
});

describe("one compilation per schema", () => {
  it("caches by the schema's text: the same text is the same compilation", () => {
    const a = compileJsonSchema(manyOptional(3));
    expect(compileJsonSchema(manyOptional(3))).toBe(a);
    expect(compileJsonSchema({ ...manyOptional(3), title: "other" })).not.toBe(a);
  });

  it("the plan assembles the grammar compiled with the schema and never walks the schema again", () => {
    const compiled = compileJsonSchema({
      type: "object",
      properties: { a: { type: "integer" } },
      required: ["a"],
    });
    // A graph that would compile to a different grammar: the plan must not look at it.
    const tampered: CompiledSchema = { ...compiled, root: { kind: "null" }, defs: new Map() };
    const capabilities: TemplateCapabilities = { tools: undefined, nativeThinking: false };
    const output = {
      format: { type: "json_schema" as const, name: "x", schema: {}, compiled: tampered },
      tools: [],
      toolChoice: "auto" as const,
      parallelToolCalls: true,
    };
    const plan = planGeneration(planPrompt([], output, false, capabilities), "", output, capabilities);
    for (const [name, body] of compiled.grammar.rules)
      expect(plan.grammar).toContain(`${name} ::= ${body}\n`);
    expect(plan.grammar).toContain(`answer-root ::= ${compiled.grammar.root}\n`);
    expect(plan.minimalAnswer).toBe('{"a":0}');
  });
});
