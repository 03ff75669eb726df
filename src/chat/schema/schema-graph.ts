// The graph a JSON Schema is parsed into (json-schema.ts): the nodes the grammar enforces and the checker validates.
import type { Bound } from "./numbers.js";
import type { Pattern } from "./pattern.js";
import type { StringFormat } from "./strings.js";

/** A schema reduced to what generation and validation need; `ref` points into `CompiledSchema.defs`. */
export type SchemaNode =
  | { kind: "any" }
  | { kind: "literal"; values: readonly unknown[] }
  | {
      kind: "string";
      minLength: number;
      maxLength: number | undefined;
      format?: StringFormat;
      pattern?: Pattern;
    }
  | { kind: "integer" | "number"; lower?: Bound; upper?: Bound; multipleOf?: number }
  | { kind: "boolean" }
  | { kind: "null" }
  | {
      kind: "array";
      items: SchemaNode;
      minItems: number;
      maxItems: number | undefined;
      /** `prefixItems`: the schemas of the first items, `items` applies after them. */
      prefix?: readonly SchemaNode[];
      unique?: boolean;
    }
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
