// Validation of generated output against a compiled schema: every constraint the graph holds, grammar-enforced or not.

import { numberProblem } from "./numbers.js";
import { matchesPattern } from "./pattern.js";
import type { SchemaGraph, SchemaNode } from "./schema-graph.js";
import { matchesFormat } from "./strings.js";

/** Undefined when `value` is an instance of the schema, otherwise where and why not. */
export function validateJson(graph: SchemaGraph, value: unknown): string | undefined {
  return new Checker(graph).check(graph.root, value, "$");
}

/**
 * Checks memoised by (node, container value): nested unions over a shared subschema would otherwise check the
 * same array or object once per path through the unions, exponentially often.
 */
class Checker {
  private readonly seen = new WeakMap<SchemaNode, WeakMap<object, string | undefined>>();

  constructor(private readonly graph: SchemaGraph) {}

  check(node: SchemaNode, value: unknown, at: string): string | undefined {
    if (typeof value !== "object" || value === null) return this.checkNode(node, value, at);
    let byValue = this.seen.get(node);
    if (byValue === undefined) {
      byValue = new WeakMap();
      this.seen.set(node, byValue);
    }
    if (byValue.has(value)) return byValue.get(value);
    const result = this.checkNode(node, value, at);
    byValue.set(value, result);
    return result;
  }

  private checkNode(node: SchemaNode, value: unknown, at: string): string | undefined {
    switch (node.kind) {
      case "any":
        return undefined;
      case "literal":
        return node.values.some((v) => deepEqual(v, value))
          ? undefined
          : `${at}: not one of the allowed values`;
      case "string":
        return this.checkString(node, value, at);
      case "integer":
      case "number": {
        const ok = node.kind === "integer" ? Number.isInteger(value) : Number.isFinite(value);
        if (!ok || typeof value !== "number")
          return `${at}: expected ${node.kind === "integer" ? "an integer" : "a number"}`;
        const problem = numberProblem(
          value,
          { integer: node.kind === "integer", lower: node.lower, upper: node.upper },
          node.multipleOf,
        );
        return problem === undefined ? undefined : `${at}: ${problem}`;
      }
      case "boolean":
        return typeof value === "boolean" ? undefined : `${at}: expected a boolean`;
      case "null":
        return value === null ? undefined : `${at}: expected null`;
      case "array":
        return this.checkArray(node, value, at);
      case "object": {
        if (!isObject(value)) return `${at}: expected an object`;
        for (const property of node.properties) {
          if (!Object.hasOwn(value, property.name)) {
            if (property.required) return `${at}: missing required property '${property.name}'`;
            continue;
          }
          const error = this.check(property.schema, value[property.name], `${at}.${property.name}`);
          if (error !== undefined) return error;
        }
        for (const [key, item] of Object.entries(value)) {
          if (node.properties.some((p) => p.name === key)) continue;
          if (node.additional === false) return `${at}: unexpected property '${key}'`;
          const error = this.check(node.additional, item, `${at}.${key}`);
          if (error !== undefined) return error;
        }
        return undefined;
      }
      case "anyOf": {
        // oneOf is generated as anyOf; an output matching two options is still accepted (documented).
        return node.options.some((o) => this.check(o, value, at) === undefined)
          ? undefined
          : `${at}: matches none of the options`;
      }
      case "ref": {
        const target = this.graph.defs.get(node.name);
        return target === undefined ? `${at}: unknown reference` : this.check(target, value, at);
      }
      default:
        return node satisfies never;
    }
  }

  private checkString(node: Extract<SchemaNode, { kind: "string" }>, value: unknown, at: string) {
    if (typeof value !== "string") return `${at}: expected a string`;
    const length = [...value].length;
    if (length < node.minLength) return `${at}: shorter than ${node.minLength}`;
    if (node.maxLength !== undefined && length > node.maxLength)
      return `${at}: longer than ${node.maxLength}`;
    if (node.format !== undefined && !matchesFormat(value, node.format))
      return `${at}: not a valid ${node.format}`;
    if (node.pattern !== undefined && !matchesPattern(value, node.pattern))
      return `${at}: does not match the pattern`;
    return undefined;
  }

  private checkArray(node: Extract<SchemaNode, { kind: "array" }>, value: unknown, at: string) {
    if (!Array.isArray(value)) return `${at}: expected an array`;
    if (value.length < node.minItems) return `${at}: fewer than ${node.minItems} items`;
    if (node.maxItems !== undefined && value.length > node.maxItems)
      return `${at}: more than ${node.maxItems} items`;
    const prefix = node.prefix ?? [];
    for (const [i, item] of value.entries()) {
      const error = this.check(prefix[i] ?? node.items, item, `${at}[${i}]`);
      if (error !== undefined) return error;
    }
    if (node.unique === true) {
      const seen = new Set<string>();
      for (const item of value) {
        const key = canonical(item);
        if (seen.has(key)) return `${at}: items are not unique`;
        seen.add(key);
      }
    }
    return undefined;
  }
}

/** JSON text with sorted keys: equal JSON values have equal texts (uniqueItems in linear time). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]))
    );
  }
  return false;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
