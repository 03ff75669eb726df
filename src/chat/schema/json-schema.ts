// JSON Schema as OpenAI defines it: parsed into a graph of nodes the grammar enforces and the checker validates.
import { Refusal } from "../../refusal.js";
import { mergeAllOf } from "./all-of.js";
import { BudgetMeter } from "./budget.js";
import { ANNOTATIONS, constraining, SUPPORTED_KEYWORDS, withoutDefs } from "./keywords.js";
import { type Bound, shortestNumber } from "./numbers.js";
import { type Pattern, PatternError, parsePattern } from "./pattern.js";
import type { PropertyNode, SchemaGraph, SchemaNode } from "./schema-graph.js";
import { isStringFormat, STRING_FORMATS } from "./strings.js";
import { isObject } from "./validate.js";

export { validateJson } from "./validate.js";
export type { PropertyNode, SchemaGraph, SchemaNode };
export { isObject };

/** A schema outside the subset. `path` is a JSON pointer inside the schema (`#/properties/a`). */
export class JsonSchemaError extends Refusal {
  override name = "JsonSchemaError";
  readonly fault = "client";
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

/** Bounds that keep grammars small (llama.cpp expands `x{m,n}` into n rules). */
export const SCHEMA_LIMITS = Object.freeze({ maxLength: 1000, maxItems: 100, maxDepth: 32 });

export interface ParseOptions {
  /**
   * Strict (OpenAI's `strict: true`): every keyword is enforced by grammar or validated after generation, and one
   * Hearth cannot enforce is a 400. Not strict: the schema is a hint; what can be enforced is, the rest is ignored.
   */
  strict?: boolean;
}

const TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"] as const;
type TypeName = (typeof TYPES)[number];

/**
 * Parses a schema into its graph, charging `meter` for every node; throws JsonSchemaError naming the first keyword
 * that cannot be enforced (strict) or that is not valid JSON Schema, SchemaBudgetError when the schema costs more
 * than the budget allows.
 */
export function parseJsonSchema(
  schema: unknown,
  meter: BudgetMeter = new BudgetMeter(),
  options: ParseOptions = {},
): SchemaGraph {
  if (!isObject(schema) && typeof schema !== "boolean") {
    throw new JsonSchemaError("A JSON Schema must be an object.", "#");
  }
  const defs = new Map<string, SchemaNode>();
  const rawDefs = isObject(schema) ? { ...asRecord(schema.definitions), ...asRecord(schema.$defs) } : {};
  const defKeyword = isObject(schema) && schema.$defs !== undefined ? "$defs" : "definitions";
  const compiler = new Compiler(rawDefs, meter, options.strict ?? true);
  for (const [name, def] of Object.entries(rawDefs)) {
    defs.set(name, compiler.node(def, `#/${defKeyword}/${name}`, 1));
  }
  return { root: compiler.node(schema, "#", 0), defs };
}

const REF = /^#\/(?:\$defs|definitions)\/([^/]+)$/;

class Compiler {
  /** Subschemas already compiled, by identity, with the height of their node graph (for the depth bound). */
  private readonly memo = new WeakMap<object, { node: SchemaNode; height: number }>();
  private readonly heights = new WeakMap<SchemaNode, number>();

  constructor(
    private readonly rawDefs: Readonly<Record<string, unknown>>,
    private readonly meter: BudgetMeter,
    private readonly strict: boolean,
  ) {}

  node(schema: unknown, path: string, depth: number): SchemaNode {
    if (depth > SCHEMA_LIMITS.maxDepth) {
      throw new JsonSchemaError(`The schema nests deeper than ${SCHEMA_LIMITS.maxDepth} levels.`, path);
    }
    if (!isObject(schema)) return this.build(schema, path, depth);
    const known = this.memo.get(schema);
    if (known !== undefined) {
      if (depth + known.height > SCHEMA_LIMITS.maxDepth) {
        throw new JsonSchemaError(`The schema nests deeper than ${SCHEMA_LIMITS.maxDepth} levels.`, path);
      }
      return known.node;
    }
    const node = this.build(schema, path, depth);
    this.memo.set(schema, { node, height: this.heightOf(node) });
    return node;
  }

  /** Levels below `node` (a reference counts as a leaf: definitions are compiled on their own). */
  private heightOf(node: SchemaNode): number {
    const known = this.heights.get(node);
    if (known !== undefined) return known;
    const below = (children: readonly SchemaNode[]) =>
      children.reduce((max, child) => Math.max(max, 1 + this.heightOf(child)), 0);
    let height = 0;
    if (node.kind === "array") height = below([node.items, ...(node.prefix ?? [])]);
    else if (node.kind === "anyOf") height = below(node.options);
    else if (node.kind === "object") {
      const children = node.properties.map((p) => p.schema);
      height = below(node.additional === false ? children : [...children, node.additional]);
    }
    this.heights.set(node, height);
    return height;
  }

  /** A keyword Hearth cannot enforce: a 400 in a strict schema; a hint (ignored) otherwise. */
  private unenforceable(message: string, path: string): void {
    if (this.strict) throw new JsonSchemaError(message, path);
  }

  private build(schema: unknown, path: string, depth: number): SchemaNode {
    this.meter.charge("nodes", 1, path);
    if (schema === true) return { kind: "any" };
    if (schema === false) throw new JsonSchemaError("A 'false' schema has no instance.", path);
    if (!isObject(schema)) throw new JsonSchemaError("A schema must be an object or a boolean.", path);
    for (const key of Object.keys(schema)) {
      if (!SUPPORTED_KEYWORDS.has(key) && !ANNOTATIONS.has(key)) {
        this.unenforceable(
          `JSON Schema keyword '${key}' is not supported in strict mode (at ${path}). Supported keywords: ${[...SUPPORTED_KEYWORDS].join(", ")}.`,
          `${path}/${key}`,
        );
      }
    }
    if ((schema.$defs !== undefined || schema.definitions !== undefined) && path !== "#") {
      this.unenforceable("'$defs' is only supported at the root of the schema.", path);
    }
    if (schema.allOf !== undefined) return this.allOf(schema, path, depth);
    if (schema.$ref !== undefined) {
      const siblings = constraining(Object.keys(schema).filter((k) => k !== "$ref"));
      if (siblings.length === 0) return this.ref(schema.$ref, path);
      // A reference beside constraints: both hold (2020-12), so they merge like `allOf`.
      const { $ref, ...rest } = schema;
      return this.merged([{ $ref }, withoutDefs(rest)], path, depth);
    }
    if (schema.const !== undefined) return { kind: "literal", values: [schema.const] };
    if (schema.enum !== undefined) {
      if (!Array.isArray(schema.enum) || schema.enum.length === 0) {
        throw new JsonSchemaError("'enum' must be a non-empty array.", `${path}/enum`);
      }
      this.meter.charge("nodes", schema.enum.length, `${path}/enum`);
      return { kind: "literal", values: schema.enum };
    }
    const union = schema.anyOf ?? schema.oneOf;
    if (union !== undefined) {
      const keyword = schema.anyOf !== undefined ? "anyOf" : "oneOf";
      if (schema.anyOf !== undefined && schema.oneOf !== undefined) {
        this.unenforceable("Use either 'anyOf' or 'oneOf', not both.", path);
      }
      if (!Array.isArray(union) || union.length === 0) {
        throw new JsonSchemaError(`'${keyword}' must be a non-empty array.`, `${path}/${keyword}`);
      }
      const { anyOf: _a, oneOf: _o, ...rest } = schema;
      const options = union.map((option, i) =>
        this.node(mergeSiblings(rest, option), `${path}/${keyword}/${i}`, depth + 1),
      );
      return { kind: "anyOf", options, exactlyOne: keyword === "oneOf" };
    }
    const types = this.types(schema, path);
    if (types === undefined) return { kind: "any" };
    const nodes = types.map((type) => this.typed(type, schema, path, depth));
    return nodes.length === 1
      ? (nodes[0] as SchemaNode)
      : { kind: "anyOf", options: nodes, exactlyOne: false };
  }

  private ref(ref: unknown, path: string): SchemaNode {
    const name = typeof ref === "string" ? REF.exec(ref)?.[1] : undefined;
    if (name === undefined || !Object.hasOwn(this.rawDefs, name)) {
      this.unenforceable(
        `'$ref' must point to an entry of the root '$defs' (#/$defs/NAME); got ${JSON.stringify(ref)}.`,
        `${path}/$ref`,
      );
      return { kind: "any" };
    }
    return { kind: "ref", name };
  }

  /** `allOf`: a lone reference stays a reference (pydantic's wrapper); anything else merges into one schema. */
  private allOf(schema: Record<string, unknown>, path: string, depth: number): SchemaNode {
    const { allOf, ...rest } = schema;
    if (!Array.isArray(allOf) || allOf.length === 0) {
      throw new JsonSchemaError("'allOf' must be a non-empty array.", `${path}/allOf`);
    }
    const only = allOf[0];
    const siblings = constraining(Object.keys(rest));
    if (allOf.length === 1 && isObject(only) && siblings.length === 0) {
      const inner = constraining(Object.keys(only));
      if (inner.length === 1 && inner[0] === "$ref") return this.ref(only.$ref, `${path}/allOf/0`);
      return this.node(only, `${path}/allOf/0`, depth + 1);
    }
    return this.merged([withoutDefs(rest), ...allOf], `${path}/allOf`, depth);
  }

  private merged(parts: readonly unknown[], path: string, depth: number): SchemaNode {
    const { merged, conflicts } = mergeAllOf(parts, (ref) => {
      const name = REF.exec(ref)?.[1];
      const target = name === undefined ? undefined : this.rawDefs[name];
      return isObject(target) ? target : undefined;
    });
    if (conflicts.length > 0) {
      this.unenforceable(
        `The schemas of 'allOf' (or of '$ref' and its siblings) cannot be merged into one: '${conflicts[0]}' differs or cannot be resolved.`,
        path,
      );
    }
    return this.node(merged, path, depth + 1);
  }

  private types(schema: Record<string, unknown>, path: string): TypeName[] | undefined {
    const type = schema.type;
    if (type === undefined) {
      const has = (...keys: string[]) => keys.some((k) => schema[k] !== undefined);
      if (has("properties", "additionalProperties")) return ["object"];
      if (has("items", "prefixItems")) return ["array"];
      if (has("minLength", "maxLength", "pattern", "format")) return ["string"];
      if (has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")) return ["number"];
      return undefined;
    }
    const list = Array.isArray(type) ? type : [type];
    if (list.length === 0) throw new JsonSchemaError("'type' must not be an empty array.", `${path}/type`);
    for (const t of list) {
      if (!TYPES.includes(t as TypeName)) {
        throw new JsonSchemaError(
          `Unknown type ${JSON.stringify(t)}; supported: ${TYPES.join(", ")}.`,
          `${path}/type`,
        );
      }
    }
    return [...new Set(list as TypeName[])];
  }

  private typed(type: TypeName, schema: Record<string, unknown>, path: string, depth: number): SchemaNode {
    switch (type) {
      case "string":
        return this.string(schema, path);
      case "integer":
      case "number":
        return this.number(type, schema, path);
      case "boolean":
      case "null":
        return { kind: type };
      case "array":
        return this.array(schema, path, depth);
      case "object":
        return this.object(schema, path, depth);
      default:
        return type satisfies never;
    }
  }

  private string(schema: Record<string, unknown>, path: string): SchemaNode {
    const minLength = this.bound(schema.minLength, `${path}/minLength`, SCHEMA_LIMITS.maxLength) ?? 0;
    const maxLength = this.bound(schema.maxLength, `${path}/maxLength`, SCHEMA_LIMITS.maxLength);
    if (maxLength !== undefined && maxLength < minLength) {
      throw new JsonSchemaError("'maxLength' is smaller than 'minLength'.", `${path}/maxLength`);
    }
    const node: Extract<SchemaNode, { kind: "string" }> = { kind: "string", minLength, maxLength };
    const format = schema.format;
    if (format !== undefined) {
      if (typeof format !== "string")
        throw new JsonSchemaError("'format' must be a string.", `${path}/format`);
      if (isStringFormat(format)) node.format = format;
      else {
        this.unenforceable(
          `The 'format' ${JSON.stringify(format)} is not supported in strict mode; supported: ${STRING_FORMATS.join(", ")}.`,
          `${path}/format`,
        );
      }
    }
    const pattern = schema.pattern;
    if (pattern !== undefined) {
      if (typeof pattern !== "string")
        throw new JsonSchemaError("'pattern' must be a string.", `${path}/pattern`);
      try {
        node.pattern = clampLengths(parsePattern(pattern), minLength, maxLength);
      } catch (error) {
        if (!(error instanceof PatternError)) throw error;
        // zod writes its own regex of a format beside it (its e-mail one has lookaheads): the format, enforced by
        // grammar, stands for it, and the pattern is a hint.
        if (node.format !== undefined) return node;
        this.unenforceable(
          `This 'pattern' is not supported in strict mode: ${error.message}`,
          `${path}/pattern`,
        );
      }
    }
    return node;
  }

  private number(kind: "integer" | "number", schema: Record<string, unknown>, path: string): SchemaNode {
    const num = (key: string): number | undefined => {
      const value = schema[key];
      if (value === undefined || typeof value === "boolean") return undefined;
      if (typeof value !== "number" || !Number.isFinite(value)) {
        throw new JsonSchemaError(`'${key}' must be a number.`, `${path}/${key}`);
      }
      return value;
    };
    // Draft 4 wrote exclusive bounds as booleans beside minimum/maximum.
    const side = (inclusive: string, exclusive: string, tighter: (a: number, b: number) => boolean) => {
      const incl = num(inclusive);
      const excl = num(exclusive);
      const flag = schema[exclusive] === true;
      let bound: Bound | undefined = incl === undefined ? undefined : { value: incl, exclusive: flag };
      if (excl !== undefined && (bound === undefined || tighter(excl, bound.value) || excl === bound.value)) {
        bound = { value: excl, exclusive: true };
      }
      return bound;
    };
    const node: Extract<SchemaNode, { kind: "integer" | "number" }> = { kind };
    const lower = side("minimum", "exclusiveMinimum", (a, b) => a > b);
    const upper = side("maximum", "exclusiveMaximum", (a, b) => a < b);
    if (lower !== undefined) node.lower = lower;
    if (upper !== undefined) node.upper = upper;
    const multipleOf = num("multipleOf");
    if (multipleOf !== undefined) {
      if (multipleOf <= 0)
        throw new JsonSchemaError("'multipleOf' must be greater than 0.", `${path}/multipleOf`);
      node.multipleOf = multipleOf;
    }
    if (shortestNumber({ integer: kind === "integer", lower, upper }, multipleOf) === undefined) {
      throw new JsonSchemaError(
        `No ${kind} that can be written with at most ${kind === "integer" ? "16" : "15"} digits satisfies the bounds${multipleOf === undefined ? "" : " and 'multipleOf'"}.`,
        path,
      );
    }
    return node;
  }

  private array(schema: Record<string, unknown>, path: string, depth: number): SchemaNode {
    // Draft 7 tuples: `items` as an array and `additionalItems` for the rest.
    const tuple = Array.isArray(schema.items);
    const prefixRaw = tuple ? schema.items : schema.prefixItems;
    const restRaw = tuple ? schema.additionalItems : schema.items;
    const prefixKey = tuple ? "items" : "prefixItems";
    if (prefixRaw !== undefined && !Array.isArray(prefixRaw)) {
      throw new JsonSchemaError("'prefixItems' must be an array of schemas.", `${path}/prefixItems`);
    }
    const prefix = (prefixRaw ?? []).map((item, i) =>
      this.node(item, `${path}/${prefixKey}/${i}`, depth + 1),
    );
    const restKey = tuple ? "additionalItems" : "items";
    const items =
      restRaw === undefined || restRaw === false
        ? ({ kind: "any" } as const)
        : this.node(restRaw, `${path}/${restKey}`, depth + 1);
    const minItems = this.bound(schema.minItems, `${path}/minItems`, SCHEMA_LIMITS.maxItems) ?? 0;
    let maxItems = this.bound(schema.maxItems, `${path}/maxItems`, SCHEMA_LIMITS.maxItems);
    if (restRaw === false) maxItems = Math.min(maxItems ?? prefix.length, prefix.length);
    if (maxItems !== undefined && maxItems < minItems) {
      throw new JsonSchemaError(
        "'maxItems' is smaller than 'minItems' (or than the tuple allows).",
        `${path}/maxItems`,
      );
    }
    const node: Extract<SchemaNode, { kind: "array" }> = { kind: "array", items, minItems, maxItems };
    if (prefix.length > 0) node.prefix = prefix;
    if (schema.uniqueItems !== undefined && typeof schema.uniqueItems !== "boolean") {
      throw new JsonSchemaError("'uniqueItems' must be a boolean.", `${path}/uniqueItems`);
    }
    if (schema.uniqueItems === true) node.unique = true;
    return node;
  }

  private object(schema: Record<string, unknown>, path: string, depth: number): SchemaNode {
    const properties = schema.properties === undefined ? {} : schema.properties;
    if (!isObject(properties))
      throw new JsonSchemaError("'properties' must be an object.", `${path}/properties`);
    const required = schema.required ?? [];
    if (!Array.isArray(required) || !required.every((r) => typeof r === "string")) {
      throw new JsonSchemaError("'required' must be an array of strings.", `${path}/required`);
    }
    const entries: [string, unknown][] = Object.entries(properties);
    for (const name of required) {
      if (Object.hasOwn(properties, name)) continue;
      this.unenforceable(`Required property '${name}' is not declared in 'properties'.`, `${path}/required`);
      // A hint: the property must be there, with any value.
      entries.push([name, true]);
    }
    const requiredSet = new Set<string>(required);
    this.meter.charge("properties", entries.length, `${path}/properties`);
    const nodes = entries.map(([name, sub]) => ({
      name,
      schema: this.node(sub, `${path}/properties/${name}`, depth + 1),
      required: requiredSet.has(name),
    }));
    const extra = schema.additionalProperties;
    const additional =
      extra === undefined || extra === true
        ? ({ kind: "any" } as const)
        : extra === false
          ? false
          : this.node(extra, `${path}/additionalProperties`, depth + 1);
    return { kind: "object", properties: nodes, additional };
  }

  /** A length or count: past Hearth's limit it is a 400 when strict, not enforced when only a hint. */
  private bound(value: unknown, path: string, max: number): number | undefined {
    if (value === undefined) return undefined;
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
      throw new JsonSchemaError("Expected a non-negative integer.", path);
    }
    if (value > max) {
      this.unenforceable(`At most ${max} is supported.`, path);
      return undefined;
    }
    return value;
  }
}

/**
 * `^[a-z]+$` beside `maxLength: 8`: a pattern that is one repeated class takes the length bounds into its
 * repetition, so the grammar enforces both (other patterns leave the lengths to the check after generation).
 */
function clampLengths(pattern: Pattern, minLength: number, maxLength: number | undefined): Pattern {
  const re = pattern.regex;
  if (!pattern.anchoredStart || !pattern.anchoredEnd || re.kind !== "repeat" || re.item.kind !== "set") {
    return pattern;
  }
  const min = Math.max(re.min, minLength);
  const max = Math.min(re.max, maxLength ?? Number.POSITIVE_INFINITY);
  return min > max ? pattern : { ...pattern, regex: { ...re, min, max } };
}

/** `{"type":"object", "anyOf":[{...},{...}]}`: each option gets the shared keywords (options win on conflicts). */
function mergeSiblings(rest: Record<string, unknown>, option: unknown): unknown {
  const shared = Object.fromEntries(constraining(Object.keys(rest)).map((key) => [key, rest[key]]));
  if (Object.keys(shared).length === 0 || !isObject(option)) return option;
  return { ...shared, ...option };
}

function asRecord(value: unknown): Record<string, unknown> {
  return isObject(value) ? value : {};
}
