// `allOf` (and `$ref` with constraining siblings) merged into one schema where the parts combine keyword by keyword.
import { deepEqual, isObject } from "./validate.js";

type Raw = Record<string, unknown>;

/** What merging found it could not combine: a keyword with two values no single schema expresses. */
export interface MergeResult {
  merged: Raw;
  conflicts: string[];
}

const LOWER = new Set(["minimum", "exclusiveMinimum", "minLength", "minItems"]);
const UPPER = new Set(["maximum", "exclusiveMaximum", "maxLength", "maxItems"]);
const FIRST_WINS = new Set(["title", "description", "default", "examples", "$comment", "deprecated"]);
/** `$ref`s followed while merging, at most: a definition whose `allOf` refers back to itself ends here. */
const MAX_REFS = 16;

/**
 * Merges schemas that all must hold. `resolve` gives a `$ref`'s definition; a part that is a reference is merged as
 * its definition. Type lists intersect, properties merge (a property in two parts is the `allOf` of both), `required`
 * unites, bounds take the tighter value, equal values stay; anything else that differs is a conflict (the first
 * part's value is kept).
 */
export function mergeAllOf(
  parts: readonly unknown[],
  resolve: (ref: string) => Raw | undefined,
): MergeResult {
  const conflicts: string[] = [];
  let refs = 0;
  const flatten = (part: unknown): Raw[] => {
    if (part === true) return [];
    if (!isObject(part)) {
      conflicts.push("allOf");
      return [];
    }
    const { allOf, $ref, ...rest } = part;
    const out: Raw[] = [];
    if (typeof $ref === "string") {
      const target = ++refs <= MAX_REFS ? resolve($ref) : undefined;
      if (target === undefined) conflicts.push("$ref");
      else out.push(...flatten(target));
    }
    if (Array.isArray(allOf)) for (const inner of allOf) out.push(...flatten(inner));
    out.push(rest);
    return out;
  };
  const merged: Raw = {};
  for (const part of parts.flatMap(flatten)) {
    for (const [key, value] of Object.entries(part)) {
      if (!Object.hasOwn(merged, key)) merged[key] = value;
      else merged[key] = combine(key, merged[key], value, conflicts);
    }
  }
  return { merged, conflicts };
}

function combine(key: string, a: unknown, b: unknown, conflicts: string[]): unknown {
  if (deepEqual(a, b) || FIRST_WINS.has(key)) return a;
  if (typeof a === "number" && typeof b === "number") {
    if (LOWER.has(key)) return Math.max(a, b);
    if (UPPER.has(key)) return Math.min(a, b);
  }
  switch (key) {
    case "type": {
      const list = (t: unknown) => (Array.isArray(t) ? t : [t]);
      const common = list(a).filter((t) => list(b).includes(t));
      if (common.length > 0) return common.length === 1 ? common[0] : common;
      break;
    }
    case "required":
      if (Array.isArray(a) && Array.isArray(b)) return [...new Set([...a, ...b])];
      break;
    case "properties":
      if (isObject(a) && isObject(b)) {
        const out: Raw = { ...a };
        for (const [name, schema] of Object.entries(b)) {
          out[name] =
            Object.hasOwn(a, name) && !deepEqual(a[name], schema) ? { allOf: [a[name], schema] } : schema;
        }
        return out;
      }
      break;
    case "additionalProperties":
      if (a === false || b === false) return false;
      if (a === true) return b;
      if (b === true) return a;
      return { allOf: [a, b] };
    case "enum":
      if (Array.isArray(a) && Array.isArray(b)) {
        const common = a.filter((x) => b.some((y) => deepEqual(x, y)));
        if (common.length > 0) return common;
      }
      break;
    case "items":
      if (isObject(a) && isObject(b)) return { allOf: [a, b] };
      break;
  }
  conflicts.push(key);
  return a;
}
