// Recursive schemas whose grammar would keep more parses open with every nesting level are refused; recursive
// schemas a parse can follow with one live option per level (trees, lists, JSON values, tagged unions) are not.
import { describe, expect, it } from "vitest";
import { AmbiguousRecursionError, checkRecursionAmbiguity } from "./ambiguity.js";
import { BudgetMeter } from "./budget.js";
import { parseJsonSchema } from "./json-schema.js";

const check = (schema: unknown) => checkRecursionAmbiguity(parseJsonSchema(schema, new BudgetMeter()));
const refusal = (schema: unknown) => {
  try {
    check(schema);
  } catch (err) {
    return err;
  }
  return undefined;
};
const node = (anyOf: unknown[]) => ({ $defs: { n: { anyOf } }, $ref: "#/$defs/n" });
const ref = { $ref: "#/$defs/n" };

describe("recursion ambiguity", () => {
  it.each<[string, unknown, string, [number, number]]>([
    [
      "two array options over the same items, differing only in their bounds",
      node([
        { type: "array", items: ref, maxItems: 5 },
        { type: "array", items: ref, maxItems: 6 },
      ]),
      "#/$defs/n",
      [0, 1],
    ],
    [
      "a third such option after an unambiguous one",
      node([{ type: "integer" }, { type: "array", items: ref }, { type: "array", items: ref, minItems: 1 }]),
      "#/$defs/n",
      [1, 2],
    ],
    [
      "object options that recurse in their first property, before the tag that tells them apart",
      node([
        { type: "object", properties: { child: ref, kind: { const: "a" } }, required: ["kind"] },
        { type: "object", properties: { child: ref, kind: { const: "b" } }, required: ["kind"] },
      ]),
      "#/$defs/n",
      [0, 1],
    ],
    [
      "tuples that recurse in their first item, told apart only by the second",
      node([
        { type: "array", prefixItems: [ref, { const: "a" }] },
        { type: "array", prefixItems: [ref, { const: "b" }] },
      ]),
      "#/$defs/n",
      [0, 1],
    ],
    [
      "tags that are the same value",
      node([
        { type: "object", properties: { kind: { const: "x" }, left: ref }, required: ["kind", "left"] },
        {
          type: "object",
          properties: { kind: { enum: ["y", "x"] }, right: ref },
          required: ["kind", "right"],
        },
      ]),
      "#/$defs/n",
      [0, 1],
    ],
    [
      "a union reached through a property of the root",
      {
        type: "object",
        properties: { tree: ref },
        required: ["tree"],
        $defs: {
          n: {
            anyOf: [
              { type: "array", items: ref },
              { type: "array", items: ref, maxItems: 3 },
            ],
          },
        },
      },
      "#/$defs/n",
      [0, 1],
    ],
  ])("refuses %s", (_, schema, path, options) => {
    const err = refusal(schema);
    expect(err).toBeInstanceOf(AmbiguousRecursionError);
    expect(err).toMatchObject({ path, options });
  });

  it.each<[string, unknown]>([
    ["nested arrays of integers", node([{ type: "array", items: ref }, { type: "integer" }])],
    [
      "a JSON value (each container type once)",
      node([
        { type: "string" },
        { type: "number" },
        { type: "boolean" },
        { type: "null" },
        { type: "array", items: ref },
        { type: "object", additionalProperties: ref },
      ]),
    ],
    [
      "an expression tree tagged by a first, required const",
      node([
        { type: "object", properties: { op: { const: "neg" }, arg: ref }, required: ["op", "arg"] },
        {
          type: "object",
          properties: { op: { const: "add" }, left: ref, right: ref },
          required: ["op", "left", "right"],
        },
        {
          type: "object",
          properties: { op: { const: "num" }, value: { type: "number" } },
          required: ["op", "value"],
        },
      ]),
    ],
    [
      "a linked list",
      {
        $defs: {
          item: {
            type: "object",
            properties: {
              value: { type: "string" },
              next: { anyOf: [{ $ref: "#/$defs/item" }, { type: "null" }] },
            },
            required: ["value", "next"],
          },
        },
        $ref: "#/$defs/item",
      },
    ],
    [
      "two array options of which only one recurses",
      node([
        { type: "array", items: ref },
        { type: "array", items: { type: "string" } },
        { type: "integer" },
      ]),
    ],
    [
      "a union of alike options that does not recurse",
      {
        anyOf: [
          { type: "array", items: { type: "integer" } },
          { type: "array", maxItems: 2 },
        ],
      },
    ],
  ])("accepts %s", (_, schema) => {
    expect(refusal(schema)).toBeUndefined();
  });
});
