// The one compilation of a request's schema: graph, grammar and shortest instance, within the budget, cached by hash.
import { createHash } from "node:crypto";
import { checkRecursionAmbiguity } from "./ambiguity.js";
import { BudgetMeter, type SchemaCost } from "./budget.js";
import { type SchemaGrammar, schemaGrammar } from "./gbnf.js";
import { parseJsonSchema, type SchemaGraph, type SchemaNode } from "./json-schema.js";
import { minimalInstance } from "./minimal.js";
import { enumeratedMultiples } from "./numbers.js";
import { checkNesting, checkSchemaValidity } from "./validity.js";

/**
 * A schema compiled for generation and validation. The API compiles each schema of a request once, when it checks
 * it; the engine assembles the request's grammar from `grammar` and budgets with `minimal`, compiling nothing.
 */
export interface CompiledSchema extends SchemaGraph {
  /** SHA-256 of the schema's JSON text: the cache key, and the prefix of its grammar rules. */
  hash: string;
  grammar: SchemaGrammar;
  /** The shortest instance (compact JSON). */
  minimal: string;
  /** What compiling it cost: charged again to each request that uses it (cached or not). */
  cost: SchemaCost;
}

export interface CompileOptions {
  /** The request's meter: every schema of one request draws on the same budget. Default: a fresh default one. */
  meter?: BudgetMeter;
  /**
   * OpenAI's `strict`: every keyword enforced (by grammar or validated after generation) or a 400. Not strict: any
   * valid JSON Schema, enforced as far as Hearth can, the rest a hint. Default: strict.
   */
  strict?: boolean;
}

/** Compiled schemas by hash, least recently used first. Bounded in entries and in grammar bytes. */
const CACHE_ENTRIES = 256;
const CACHE_GRAMMAR_BYTES = 16 * 1024 * 1024;
const cache = new Map<string, CompiledSchema>();
let cachedBytes = 0;

/**
 * Compiles a schema (or returns the cached compilation of the same JSON text). Throws JsonSchemaError for a schema
 * outside the subset, SchemaBudgetError for one over the meter's budget (work stops as soon as a limit is passed),
 * AmbiguousRecursionError for a recursion whose grammar cost would grow with the output's depth.
 */
export function compileJsonSchema(schema: unknown, options: CompileOptions = {}): CompiledSchema {
  const meter = options.meter ?? new BudgetMeter();
  checkNesting(schema);
  const hash = createHash("sha256")
    .update(JSON.stringify(schema) ?? "")
    .digest("hex");
  // The budget is part of the key: a schema compiled under a larger budget says nothing about this one.
  const strict = options.strict ?? true;
  const key = `${hash}:${strict}:${JSON.stringify(meter.budget)}`;
  const cached = cache.get(key);
  if (cached !== undefined) {
    meter.chargeCost(cached.cost, "#");
    meter.check("alternatives", openAlternatives(cached), "#");
    cache.delete(key);
    cache.set(key, cached);
    return cached;
  }
  const before = meter.cost();
  const graph = parseJsonSchema(schema, meter, { strict });
  checkSchemaValidity(schema);
  meter.check("alternatives", openAlternatives(graph), "#");
  checkRecursionAmbiguity(graph);
  const minimal = minimalInstance(graph, meter);
  const grammar = schemaGrammar(graph, `${strict ? "s" : "h"}${hash.slice(0, 8)}`, meter);
  const compiled: CompiledSchema = { ...graph, hash, grammar, minimal, cost: meter.cost(before) };
  remember(key, compiled);
  return compiled;
}

function remember(key: string, compiled: CompiledSchema): void {
  cache.set(key, compiled);
  cachedBytes += compiled.cost.grammarBytes;
  while (cache.size > CACHE_ENTRIES || cachedBytes > CACHE_GRAMMAR_BYTES) {
    const [oldest, entry] = cache.entries().next().value as [string, CompiledSchema];
    cache.delete(oldest);
    cachedBytes -= entry.cost.grammarBytes;
  }
}

/**
 * How many alternatives the schema's grammar may keep open at one point: llama.cpp keeps a parse stack per open
 * alternative and its cost per token grows faster than linearly with their number. A union adds its options'
 * counts; a container multiplies nothing but passes its children's on (two array options over one shared item
 * schema keep two stacks per open level); an enum adds its values. A reference back into a definition being
 * counted counts 1 (recursion repeats a count, it does not add a new one). An object keeps every optional property
 * of a run open at once (any of them may come next), each costing llama.cpp about as much as OPTIONAL_WEIGHT enum
 * values (measured: 200 optional properties parse as slowly as 1000 enum values).
 */
const OPTIONAL_WEIGHT = 5;

export function openAlternatives(graph: SchemaGraph): number {
  const memo = new Map<SchemaNode, number>();
  const visiting = new Set<string>();
  const count = (node: SchemaNode): number => {
    const known = memo.get(node);
    if (known !== undefined) return known;
    let result: number;
    switch (node.kind) {
      case "literal":
        result = node.values.length;
        break;
      case "array":
        result = Math.max(count(node.items), ...(node.prefix ?? []).map(count));
        break;
      case "object": {
        result = node.additional === false ? 1 : count(node.additional);
        let run = 0;
        for (const property of node.properties) {
          result = Math.max(result, count(property.schema));
          run = property.required ? 0 : run + 1;
          result = Math.max(result, run * OPTIONAL_WEIGHT + 1);
        }
        break;
      }
      case "anyOf":
        result = node.options.reduce((sum, option) => sum + count(option), 0);
        break;
      case "integer":
      case "number": {
        // `multipleOf` within close bounds is a choice among the multiples, like an enum.
        const constraint = { integer: node.kind === "integer", lower: node.lower, upper: node.upper };
        const multiples =
          node.multipleOf === undefined ? undefined : enumeratedMultiples(constraint, node.multipleOf);
        result = multiples?.length ?? 1;
        break;
      }
      case "ref": {
        const target = graph.defs.get(node.name);
        if (target === undefined || visiting.has(node.name)) return 1;
        visiting.add(node.name);
        result = count(target);
        visiting.delete(node.name);
        // Not memoised: the count of a node inside a cycle depends on where the cycle was entered.
        return result;
      }
      default:
        result = 1;
    }
    memo.set(node, result);
    return result;
  };
  return count(graph.root);
}
