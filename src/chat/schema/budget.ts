// What one request's schemas may cost to compile and to enforce: every limit a name, a default and a meter.
import { Refusal } from "../../refusal.js";

/**
 * Defaults of the schema budget (config `server.schemaBudget`). Each bounds work that runs on the event loop before
 * the request is queued (compiling, the grammar llama.cpp parses) or while it generates (the grammar's open
 * alternatives), so one request's schema cannot stall every other tenant's.
 */
export const SCHEMA_BUDGET_DEFAULTS = Object.freeze({
  /** Compiled nodes (subschemas, properties and enum values) of all the request's schemas together. */
  nodes: 5000,
  /** Declared properties of all the request's schemas together. */
  properties: 2000,
  /** Alternatives a schema's grammar may keep open at once (options of nested unions multiply, enum values add). */
  alternatives: 1000,
  /** GBNF text of all the request's schemas together, in bytes. */
  grammarBytes: 256 * 1024,
  /** Rules llama.cpp expands bounded repetitions into (`x{0,1000}` is 1000), all schemas together. */
  repetitions: 20000,
  /** Characters of a schema's shortest instance: a longer one could never fit a context anyway. */
  minimalLength: 65536,
});

export type SchemaBudget = { readonly [K in keyof typeof SCHEMA_BUDGET_DEFAULTS]: number };
export type SchemaLimit = keyof SchemaBudget;

const WHAT: Readonly<Record<SchemaLimit, string>> = Object.freeze({
  nodes: "subschemas, properties and enum values",
  properties: "declared properties",
  alternatives: "alternatives open at once (nested anyOf/oneOf options multiply, enum values add)",
  grammarBytes: "bytes of grammar",
  repetitions: "expanded repetitions (maxLength, maxItems)",
  minimalLength: "characters in the shortest valid instance",
});

/** A schema over the budget: `limit` names which. The request is refused (400), never compiled further. */
export class SchemaBudgetError extends Refusal {
  override name = "SchemaBudgetError";
  readonly fault = "client";
  constructor(
    readonly limit: SchemaLimit,
    readonly max: number,
    /** A JSON pointer inside the schema where the limit ran out (`#/properties/a`). */
    readonly path: string,
  ) {
    const scope = (SUMMED as readonly string[]).includes(limit) ? "per request" : "per schema";
    super(
      `The schema is too complex: it exceeds the limit '${limit}' (at most ${max} ${WHAT[limit]} ${scope}).`,
    );
  }
}

/** Limits summed over every schema of one request; the others hold per schema. */
const SUMMED = ["nodes", "properties", "grammarBytes", "repetitions"] as const;
export type SummedLimit = (typeof SUMMED)[number];
export type SchemaCost = Readonly<Record<SummedLimit, number>>;

/**
 * Counts one request's schema work against its budget; charging past a limit throws at once, so the work done
 * is bounded by the budget, not by the schema.
 */
export class BudgetMeter {
  private readonly used: Record<SummedLimit, number> = {
    nodes: 0,
    properties: 0,
    grammarBytes: 0,
    repetitions: 0,
  };

  constructor(readonly budget: SchemaBudget = SCHEMA_BUDGET_DEFAULTS) {}

  charge(limit: SummedLimit, amount: number, path: string): void {
    this.used[limit] += amount;
    if (this.used[limit] > this.budget[limit]) throw new SchemaBudgetError(limit, this.budget[limit], path);
  }

  /** Throws when `value` is over a per-schema limit. */
  check(limit: Exclude<SchemaLimit, SummedLimit>, value: number, path: string): void {
    if (value > this.budget[limit]) throw new SchemaBudgetError(limit, this.budget[limit], path);
  }

  /** What was charged since `since` (a snapshot taken with `cost()`). */
  cost(since: SchemaCost = ZERO_COST): SchemaCost {
    return Object.fromEntries(SUMMED.map((k) => [k, this.used[k] - since[k]])) as Record<SummedLimit, number>;
  }

  /** Charges a schema compiled earlier (a cache hit) as if it were compiled now. */
  chargeCost(cost: SchemaCost, path: string): void {
    for (const limit of SUMMED) this.charge(limit, cost[limit], path);
  }
}

const ZERO_COST: SchemaCost = Object.freeze({ nodes: 0, properties: 0, grammarBytes: 0, repetitions: 0 });

/** The defaults with the configured limits over them (config leaves unset limits undefined). */
export function schemaBudget(configured: { [K in SchemaLimit]?: number | undefined } = {}): SchemaBudget {
  const set = Object.entries(configured).filter(([, value]) => value !== undefined);
  return Object.freeze({ ...SCHEMA_BUDGET_DEFAULTS, ...Object.fromEntries(set) });
}
