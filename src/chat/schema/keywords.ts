// The JSON Schema keywords Hearth enforces (in strict schemas, the only ones allowed) and those it only reads.

/** Keywords a strict schema may use: each is enforced by grammar or validated after generation. */
export const SUPPORTED_KEYWORDS: ReadonlySet<string> = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "additionalItems",
  "minItems",
  "maxItems",
  "uniqueItems",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "allOf",
  "$ref",
  "$defs",
  "definitions",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
]);
/** Keywords that describe but never constrain: accepted and left out of the grammar. */
export const ANNOTATIONS: ReadonlySet<string> = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$schema",
  "$id",
  "$anchor",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "discriminator",
  "contentEncoding",
  "contentMediaType",
]);

/** The keywords that constrain (the root's definitions are not a constraint of the schema they sit in). */
export function constraining(keys: readonly string[]): string[] {
  return keys.filter((k) => SUPPORTED_KEYWORDS.has(k) && k !== "$defs" && k !== "definitions");
}

export function withoutDefs(schema: Record<string, unknown>): Record<string, unknown> {
  const { $defs: _d, definitions: _x, ...rest } = schema;
  return rest;
}
