// The shortest instance of a schema: how much of the token budget a closed answer needs at least.

import { BudgetMeter } from "./budget.js";
import { JsonSchemaError, type SchemaGraph, type SchemaNode } from "./json-schema.js";
import { shortestNumber } from "./numbers.js";
import { shortestMatch } from "./pattern.js";
import { FORMAT_MINIMAL } from "./strings.js";

/**
 * The shortest JSON text valid for the schema (compact). Throws JsonSchemaError when no instance is finite (a
 * required reference loops) and SchemaBudgetError ('minimalLength') when the shortest one is longer than the budget.
 *
 * Lengths come first, as numbers (capped, so `minItems` products along a path cannot grow without bound), memoised
 * per node and iterated to a fixpoint over `$defs` (a DAG of definitions is walked once, not once per path); the
 * text is written last, following the choices that gave the lengths, so it is no longer than the cap.
 */
export function minimalInstance(graph: SchemaGraph, meter: BudgetMeter = new BudgetMeter()): string {
  const cap = meter.budget.minimalLength + 1;
  const lengths = new MinimalLengths(graph, cap);
  const length = lengths.solve();
  if (length === Number.POSITIVE_INFINITY) {
    throw new JsonSchemaError("The schema has no finite instance (a required reference loops).", "#");
  }
  meter.check("minimalLength", length, "#");
  return new Writer(graph, lengths, length).write(graph.root);
}

class MinimalLengths {
  /** Best length found so far per node, and the option (anyOf) or value (literal) that gave it. */
  private readonly best = new Map<SchemaNode, number>();
  readonly choice = new Map<SchemaNode, number>();
  private readonly defLengths = new Map<string, number>();
  private round = new Map<SchemaNode, number>();
  private readonly inProgress = new Set<string>();

  constructor(
    private readonly graph: SchemaGraph,
    private readonly cap: number,
  ) {}

  /**
   * Rounds until no definition gets shorter. Lengths only decrease and every round settles at least one more
   * definition of a shortest derivation, so there are at most |defs| + 1 rounds (one for a DAG).
   */
  solve(): number {
    for (let rounds = 0; rounds <= this.graph.defs.size + 1; rounds++) {
      this.round = new Map();
      let changed = false;
      for (const name of this.graph.defs.keys()) {
        const before = this.defLengths.get(name) ?? Number.POSITIVE_INFINITY;
        if (this.def(name) < before) changed = true;
      }
      if (!changed) break;
    }
    this.round = new Map();
    return this.length(this.graph.root);
  }

  private def(name: string): number {
    const target = this.graph.defs.get(name);
    if (target === undefined) return Number.POSITIVE_INFINITY;
    // A reference back into a definition being computed sees the previous round's length.
    if (this.inProgress.has(name)) return this.defLengths.get(name) ?? Number.POSITIVE_INFINITY;
    this.inProgress.add(name);
    const length = this.length(target);
    this.inProgress.delete(name);
    const before = this.defLengths.get(name) ?? Number.POSITIVE_INFINITY;
    if (length < before) this.defLengths.set(name, length);
    return Math.min(length, before);
  }

  length(node: SchemaNode): number {
    const known = this.round.get(node);
    if (known !== undefined) return known;
    const computed = this.compute(node);
    // Capped so products stay small numbers; no instance at all (Infinity) stays distinct from a long one.
    const length = computed === Number.POSITIVE_INFINITY ? computed : Math.min(this.cap, computed);
    this.round.set(node, length);
    return length;
  }

  private compute(node: SchemaNode): number {
    switch (node.kind) {
      case "any":
      case "null":
      case "boolean":
        return 4; // null, true
      case "integer":
      case "number":
      case "string":
        return scalarText(node).length;
      case "literal":
        return this.pick(
          node,
          node.values.map((v) => JSON.stringify(v).length),
        );
      case "array": {
        if (node.minItems === 0) return 2;
        let total = 2 + node.minItems - 1;
        for (let i = 0; i < node.minItems; i++) {
          const item = node.prefix?.[i];
          // Past the prefix every item is the same: multiplied, not walked (minItems products stay cheap).
          if (item === undefined) return total + (node.minItems - i) * this.length(node.items);
          total += this.length(item);
        }
        return total;
      }
      case "object": {
        let total = 2;
        let count = 0;
        for (const property of node.properties) {
          if (!property.required) continue;
          total += JSON.stringify(property.name).length + 1 + this.length(property.schema);
          count++;
        }
        return total + Math.max(0, count - 1);
      }
      case "anyOf":
        return this.pick(
          node,
          node.options.map((o) => this.length(o)),
        );
      case "ref":
        return this.def(node.name);
      default:
        return node satisfies never;
    }
  }

  /** The shortest candidate; the recorded choice moves only on a strict improvement, so choices never cycle. */
  private pick(node: SchemaNode, candidates: readonly number[]): number {
    let min = Number.POSITIVE_INFINITY;
    let index = -1;
    for (const [i, length] of candidates.entries()) {
      if (length < min) {
        min = length;
        index = i;
      }
    }
    const before = this.best.get(node) ?? Number.POSITIVE_INFINITY;
    if (min < before) {
      this.best.set(node, min);
      this.choice.set(node, index);
    }
    return min;
  }
}

/** Writes the instance the lengths describe. */
class Writer {
  private readonly parts: string[] = [];
  private written = 0;
  private steps = 0;

  constructor(
    private readonly graph: SchemaGraph,
    private readonly lengths: MinimalLengths,
    private readonly expected: number,
  ) {}

  write(root: SchemaNode): string {
    this.emit(root);
    return this.parts.join("");
  }

  private out(text: string): void {
    this.written += text.length;
    if (this.written > this.expected) throw new Error("minimal instance longer than its computed length");
    this.parts.push(text);
  }

  private emit(node: SchemaNode): void {
    // References and unions write nothing themselves: a chain of them is bounded, a cycle would be a bug.
    if (++this.steps > 4 * (this.expected + 1) * 64) throw new Error("minimal instance does not terminate");
    switch (node.kind) {
      case "any":
      case "null":
        this.out("null");
        return;
      case "boolean":
        this.out("true");
        return;
      case "integer":
      case "number":
      case "string":
        this.out(scalarText(node));
        return;
      case "literal":
        this.out(JSON.stringify(node.values[this.lengths.choice.get(node) ?? 0]));
        return;
      case "array": {
        this.out("[");
        for (let i = 0; i < node.minItems; i++) {
          if (i > 0) this.out(",");
          this.emit(node.prefix?.[i] ?? node.items);
        }
        this.out("]");
        return;
      }
      case "object": {
        this.out("{");
        let first = true;
        for (const property of node.properties) {
          if (!property.required) continue;
          if (!first) this.out(",");
          first = false;
          this.out(`${JSON.stringify(property.name)}:`);
          this.emit(property.schema);
        }
        this.out("}");
        return;
      }
      case "anyOf": {
        const option = node.options[this.lengths.choice.get(node) ?? 0];
        if (option === undefined) throw new Error("union without options");
        this.emit(option);
        return;
      }
      case "ref": {
        const target = this.graph.defs.get(node.name);
        if (target === undefined) throw new Error(`unknown definition ${node.name}`);
        this.emit(target);
        return;
      }
      default:
        node satisfies never;
    }
  }
}

/**
 * The shortest text of a number or string node that its grammar admits: the number in range nearest to 0 with the
 * fewest digits, a format's shortest value, a pattern's shortest match (length bounds beside a format or pattern
 * are validated after generation, not here).
 */
function scalarText(node: Extract<SchemaNode, { kind: "integer" | "number" | "string" }>): string {
  // Once per node: a node is written once per place it occurs (10^4 leaves of one `minItems` product, say).
  const known = scalarTexts.get(node);
  if (known !== undefined) return known;
  const text = computeScalarText(node);
  scalarTexts.set(node, text);
  return text;
}

const scalarTexts = new WeakMap<SchemaNode, string>();

function computeScalarText(node: Extract<SchemaNode, { kind: "integer" | "number" | "string" }>): string {
  if (node.kind === "string") {
    if (node.pattern !== undefined) return JSON.stringify(shortestMatch(node.pattern));
    if (node.format !== undefined) return JSON.stringify(FORMAT_MINIMAL[node.format]);
    return JSON.stringify("a".repeat(node.minLength));
  }
  const text = shortestNumber(
    { integer: node.kind === "integer", lower: node.lower, upper: node.upper },
    node.multipleOf,
  );
  if (text === undefined) throw new Error("a numeric range without numbers passed the parser");
  return text;
}
