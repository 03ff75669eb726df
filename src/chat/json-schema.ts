// The JSON Schema subset Hearth enforces by grammar: parsed into a graph of nodes, validated against after generation.
import { BudgetMeter } from "./schema-budget.js";

/** A schema reduced to what generation and validation need; `ref` points into `CompiledSchema.defs`. */
export type SchemaNode =
  | { kind: "any" }
  | { kind: "literal"; values: readonly unknown[] }
  | { kind: "string"; minLength: number; maxLength: number | undefined }
  | { kind: "integer" }
  | { kind: "number" }
  | { kind: "boolean" }
  | { kind: "null" }
  | { kind: "array"; items: SchemaNode; minItems: number; maxItems: number | undefined }
  | { kind: "object"; properties: readonly PropertyNode[]; additional: SchemaNode | false }
  | { kind: "anyOf"; options: readonly SchemaNode[]; exactlyOne: boolean }
  | { kind: "ref"; name: string };

export interface PropertyNode {
  name: string;
  schema: SchemaNode;
  required: boolean;
}

/**
 * A schema as a graph: a subschema reached twice (the same JSON object, as `anyOf` siblings merged into each
 * option share theirs) is one node, so walkers that memoise by node do linear work.
 */
export interface SchemaGraph {
  root: SchemaNode;
  defs: ReadonlyMap<string, SchemaNode>;
}

/** A schema outside the subset. `path` is a JSON pointer inside the schema (`#/properties/a`). */
export class JsonSchemaError extends Error {
  override name = "JsonSchemaError";
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

/** Bounds that keep grammars small (llama.cpp expands `x{m,n}` into n rules). */
export const SCHEMA_LIMITS = Object.freeze({ maxLength: 1000, maxItems: 100, maxDepth: 32 });

const TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"] as const;
type TypeName = (typeof TYPES)[number];

const STRUCTURAL = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "minItems",
  "maxItems",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "$ref",
  "$defs",
  "definitions",
  "minLength",
  "maxLength",
]);
/** Keywords that describe but never constrain: accepted and left out of the grammar. */
const ANNOTATIONS = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
]);

/**
 * Parses a schema of the supported subset into its graph, charging `meter` for every node; throws JsonSchemaError
 * naming the first unsupported keyword, SchemaBudgetError when the schema costs more than the budget allows.
 */
export function parseJsonSchema(schema: unknown, meter: BudgetMeter = new BudgetMeter()): SchemaGraph {
  if (!isObject(schema) && typeof schema !== "boolean") {
    throw new JsonSchemaError("A JSON Schema must be an object.", "#");
  }
  const defs = new Map<string, SchemaNode>();
  const rawDefs = isObject(schema) ? { ...asRecord(schema.definitions), ...asRecord(schema.$defs) } : {};
  const defKeyword = isObject(schema) && schema.$defs !== undefined ? "$defs" : "definitions";
  const compiler = new Compiler(new Set(Object.keys(rawDefs)), meter);
  for (const [name, def] of Object.entries(rawDefs)) {
    defs.set(name, compiler.node(def, `#/${defKeyword}/${name}`, 1));
  }
  return { root: compiler.node(schema, "#", 0), defs };
}

class Compiler {
  /** Subschemas already compiled, by identity, with the height of their node graph (for the depth bound). */
  private readonly memo = new WeakMap<object, { node: SchemaNode; height: number }>();
  private readonly heights = new WeakMap<SchemaNode, number>();

  constructor(
    private readonly defNames: ReadonlySet<string>,
    private readonly meter: BudgetMeter,
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
    if (node.kind === "array") height = below([node.items]);
    else if (node.kind === "anyOf") height = below(node.options);
    else if (node.kind === "object") {
      const children = node.properties.map((p) => p.schema);
      height = below(node.additional === false ? children : [...children, node.additional]);
    }
    this.heights.set(node, height);
    return height;
  }

  private build(schema: unknown, path: string, depth: number): SchemaNode {
    this.meter.charge("nodes", 1, path);
    if (schema === true) return { kind: "any" };
    if (schema === false) throw new JsonSchemaError("A 'false' schema has no instance.", path);
    if (!isObject(schema)) throw new JsonSchemaError("A schema must be an object or a boolean.", path);
    for (const key of Object.keys(schema)) {
      if (!STRUCTURAL.has(key) && !ANNOTATIONS.has(key)) {
        throw new JsonSchemaError(
          `JSON Schema keyword '${key}' is not supported (at ${path}). Supported keywords: ${[...STRUCTURAL].join(", ")}.`,
          `${path}/${key}`,
        );
      }
    }
    if ((schema.$defs !== undefined || schema.definitions !== undefined) && path !== "#") {
      throw new JsonSchemaError("'$defs' is only supported at the root of the schema.", path);
    }
    if (schema.$ref !== undefined) return this.ref(schema, path);
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
        throw new JsonSchemaError("Use either 'anyOf' or 'oneOf', not both.", path);
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

  private ref(schema: Record<string, unknown>, path: string): SchemaNode {
    const ref = schema.$ref;
    const match = typeof ref === "string" ? /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(ref) : null;
    const name = match?.[1];
    if (name === undefined || !this.defNames.has(name)) {
      throw new JsonSchemaError(
        `'$ref' must point to an entry of the root '$defs' (#/$defs/NAME); got ${JSON.stringify(ref)}.`,
        `${path}/$ref`,
      );
    }
    const siblings = Object.keys(schema).filter(
      (key) => key !== "$ref" && key !== "$defs" && key !== "definitions" && !ANNOTATIONS.has(key),
    );
    if (siblings.length > 0) {
      throw new JsonSchemaError(`Keywords beside '$ref' are not supported: ${siblings.join(", ")}.`, path);
    }
    return { kind: "ref", name };
  }

  private types(schema: Record<string, unknown>, path: string): TypeName[] | undefined {
    const type = schema.type;
    if (type === undefined) {
      if (schema.properties !== undefined || schema.additionalProperties !== undefined) return ["object"];
      if (schema.items !== undefined) return ["array"];
      if (schema.minLength !== undefined || schema.maxLength !== undefined) return ["string"];
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
      case "string": {
        const minLength = bound(schema.minLength, `${path}/minLength`, SCHEMA_LIMITS.maxLength) ?? 0;
        const maxLength = bound(schema.maxLength, `${path}/maxLength`, SCHEMA_LIMITS.maxLength);
        if (maxLength !== undefined && maxLength < minLength) {
          throw new JsonSchemaError("'maxLength' is smaller than 'minLength'.", `${path}/maxLength`);
        }
        return { kind: "string", minLength, maxLength };
      }
      case "integer":
      case "number":
      case "boolean":
      case "null":
        return { kind: type };
      case "array": {
        const items =
          schema.items === undefined
            ? { kind: "any" as const }
            : this.node(schema.items, `${path}/items`, depth + 1);
        const minItems = bound(schema.minItems, `${path}/minItems`, SCHEMA_LIMITS.maxItems) ?? 0;
        const maxItems = bound(schema.maxItems, `${path}/maxItems`, SCHEMA_LIMITS.maxItems);
        if (maxItems !== undefined && maxItems < minItems) {
          throw new JsonSchemaError("'maxItems' is smaller than 'minItems'.", `${path}/maxItems`);
        }
        return { kind: "array", items, minItems, maxItems };
      }
      case "object":
        return this.object(schema, path, depth);
      default:
        return type satisfies never;
    }
  }

  private object(schema: Record<string, unknown>, path: string, depth: number): SchemaNode {
    const properties = schema.properties === undefined ? {} : schema.properties;
    if (!isObject(properties))
      throw new JsonSchemaError("'properties' must be an object.", `${path}/properties`);
    const required = schema.required ?? [];
    if (!Array.isArray(required) || !required.every((r) => typeof r === "string")) {
      throw new JsonSchemaError("'required' must be an array of strings.", `${path}/required`);
    }
    for (const name of required) {
      if (!Object.hasOwn(properties, name)) {
        throw new JsonSchemaError(
          `Required property '${name}' is not declared in 'properties'.`,
          `${path}/required`,
        );
      }
    }
    const requiredSet = new Set<string>(required);
    const entries = Object.entries(properties);
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
}

/** `{"type":"object", "anyOf":[{...},{...}]}`: each option gets the shared keywords (options win on conflicts). */
function mergeSiblings(rest: Record<string, unknown>, option: unknown): unknown {
  const shared = Object.fromEntries(Object.entries(rest).filter(([key]) => !ANNOTATIONS.has(key)));
  if (Object.keys(shared).length === 0 || !isObject(option)) return option;
  return { ...shared, ...option };
}

function bound(value: unknown, path: string, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new JsonSchemaError("Expected a non-negative integer.", path);
  }
  if (value > max) throw new JsonSchemaError(`At most ${max} is supported.`, path);
  return value;
}

// --- validation of generated output ---

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
        if (typeof value !== "string") return `${at}: expected a string`;
        if ([...value].length < node.minLength) return `${at}: shorter than ${node.minLength}`;
        if (node.maxLength !== undefined && [...value].length > node.maxLength)
          return `${at}: longer than ${node.maxLength}`;
        return undefined;
      case "integer":
        return Number.isInteger(value) ? undefined : `${at}: expected an integer`;
      case "number":
        return typeof value === "number" && Number.isFinite(value) ? undefined : `${at}: expected a number`;
      case "boolean":
        return typeof value === "boolean" ? undefined : `${at}: expected a boolean`;
      case "null":
        return value === null ? undefined : `${at}: expected null`;
      case "array": {
        if (!Array.isArray(value)) return `${at}: expected an array`;
        if (value.length < node.minItems) return `${at}: fewer than ${node.minItems} items`;
        if (node.maxItems !== undefined && value.length > node.maxItems)
          return `${at}: more than ${node.maxItems} items`;
        for (const [i, item] of value.entries()) {
          const error = this.check(node.items, item, `${at}[${i}]`);
          if (error !== undefined) return error;
        }
        return undefined;
      }
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
}

function deepEqual(a: unknown, b: unknown): boolean {
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

function asRecord(value: unknown): Record<string, unknown> {
  return isObject(value) ? value : {};
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
