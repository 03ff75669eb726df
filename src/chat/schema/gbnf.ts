// GBNF (llama.cpp grammar) text for JSON values, JSON Schema instances, tool calls and reasoning blocks.

import { BudgetMeter } from "./budget.js";
import type { SchemaGraph, SchemaNode } from "./json-schema.js";
import { enumeratedMultiples, NumberGrammar } from "./numbers.js";
import { patternGrammar } from "./pattern.js";
import { formatRules } from "./strings.js";

/** Nesting allowed in free-form JSON (json_object, untyped schema parts): deeper is never needed and bounds the grammar. */
export const FREE_JSON_DEPTH = 6;
/** Digits of an integer part and of a fraction: JSON.parse reads every such number exactly enough, never as Infinity. */
const MAX_DIGITS = 15;

// Whitespace is bounded at every position: one space, or one newline and a little indentation. A model can
// therefore never spend its budget on runaway blank lines inside the JSON.
const PRIMITIVES: Readonly<Record<string, string>> = Object.freeze({
  ws: '( " " | "\\n" [ ]{0,16} )?',
  // A \u escape never writes a lone surrogate (strict JSON parsers, Python's among them, refuse one).
  char: '[^"\\\\\\x00-\\x1f] | "\\\\" ( ["\\\\/bfnrt] | "u" ( [0-9a-cefA-CEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\\\u" [dD] [c-fC-F] [0-9a-fA-F]{2} ) )',
  string: '"\\"" char* "\\""',
  integer: `"-"? ( "0" | [1-9] [0-9]{0,${MAX_DIGITS - 1}} )`,
  number: `integer ( "." [0-9]{1,${MAX_DIGITS}} )?`,
  boolean: '"true" | "false"',
  null: '"null"',
});

/** Collects named rules; `build(root)` writes the grammar with `root` as its start expression. */
export class GrammarBuilder {
  private readonly rules = new Map<string, string>();
  private counter = 0;

  /** Adds (or keeps) a rule and returns its name. */
  rule(name: string, body: string): string {
    if (!this.rules.has(name)) this.rules.set(name, body);
    return name;
  }

  /** Replaces a rule's body (recursive references are declared first, then defined). */
  define(name: string, body: string): void {
    this.rules.set(name, body);
  }

  has(name: string): boolean {
    return this.rules.has(name);
  }

  fresh(prefix: string): string {
    this.counter++;
    return `${prefix}-${this.counter}`;
  }

  primitive(name: keyof typeof PRIMITIVES | "ws"): string {
    for (const dependency of DEPENDENCIES[name] ?? []) this.primitive(dependency);
    return this.rule(name, PRIMITIVES[name] as string);
  }

  /** Any JSON value nested at most `FREE_JSON_DEPTH - depth` more levels. */
  freeValue(depth = 0): string {
    const name = `value-${depth}`;
    if (this.has(name)) return name;
    for (const p of ["ws", "string", "number", "boolean", "null"] as const) this.primitive(p);
    if (depth >= FREE_JSON_DEPTH) return this.rule(name, "string | number | boolean | null");
    this.rule(name, `object-${depth} | array-${depth} | string | number | boolean | null`);
    const inner = this.freeValue(depth + 1);
    this.rule(
      `object-${depth}`,
      `"{" ws ( string ":" ws ${inner} ( "," ws string ":" ws ${inner} )* ws )? "}"`,
    );
    this.rule(`array-${depth}`, `"[" ws ( ${inner} ( "," ws ${inner} )* ws )? "]"`);
    return name;
  }

  /** Any JSON object (JSON mode). */
  freeObject(): string {
    this.freeValue(0);
    return "object-0";
  }

  /** A rule `<prefix>-root` whose instances are exactly the schema's, from its grammar compiled once. */
  schema(compiled: { grammar: SchemaGrammar }, prefix: string): string {
    for (const [name, body] of compiled.grammar.rules) this.rule(name, body);
    return this.rule(`${prefix}-root`, compiled.grammar.root);
  }

  /** The rules in order of definition. */
  entries(): IterableIterator<[string, string]> {
    return this.rules.entries();
  }

  build(root: string): string {
    const lines = [`root ::= ${root}`];
    for (const [name, body] of this.rules) lines.push(`${name} ::= ${body}`);
    return `${lines.join("\n")}\n`;
  }
}

const DEPENDENCIES: Readonly<Record<string, readonly (keyof typeof PRIMITIVES)[]>> = Object.freeze({
  string: ["char"],
  number: ["integer"],
});

/** A schema's grammar rules, compiled once; a request's grammar merges them (rule names are the schema's own). */
export interface SchemaGrammar {
  /** The expression of the schema's root. */
  root: string;
  rules: readonly (readonly [string, string])[];
}

/**
 * The GBNF rules of a schema, named under `prefix` (which should identify the schema: identical schemas may then
 * share rules). Linear in the schema graph: each node is emitted once and referenced by name, identical rule
 * bodies share one rule, and an object's optional properties chain through named suffix rules. Charges `meter`
 * for every byte and every expanded repetition as it goes, so an oversized schema stops early.
 */
export function schemaGrammar(graph: SchemaGraph, prefix: string, meter = new BudgetMeter()): SchemaGrammar {
  const g = new GrammarBuilder();
  const root = new SchemaEmitter(g, graph, prefix, meter).expression(graph.root);
  return { root, rules: [...g.entries()] };
}

class SchemaEmitter {
  private readonly names = new Map<SchemaNode, string>();
  private readonly bodies = new Map<string, string>();
  private counter = 0;

  constructor(
    private readonly g: GrammarBuilder,
    private readonly graph: SchemaGraph,
    private readonly prefix: string,
    private readonly meter: BudgetMeter,
  ) {}

  /** A new rule for `body` (charged with the `repetitions` it expands to), or the rule that already has this body. */
  private rule(body: string, at: string, repetitions = 0): string {
    const existing = this.bodies.get(body);
    if (existing !== undefined) return existing;
    this.counter++;
    const name = `${this.prefix}-${this.counter}`;
    this.charge(name, body, at);
    this.meter.charge("repetitions", repetitions, at);
    this.bodies.set(body, name);
    return this.g.rule(name, body);
  }

  private charge(name: string, body: string, at: string): void {
    this.meter.charge("grammarBytes", name.length + body.length + 5, at);
  }

  /** Counts a repetition llama.cpp expands into `count` rules, once per distinct rule. */
  private repeat(name: string, count: number, body: string): string {
    if (this.g.has(name)) return name;
    this.meter.charge("repetitions", count, "#");
    this.charge(name, body, "#");
    return this.g.rule(name, body);
  }

  expression(node: SchemaNode): string {
    const g = this.g;
    switch (node.kind) {
      case "any":
        return g.freeValue(1);
      case "literal":
        return group(node.values.map((v) => literal(JSON.stringify(v))));
      case "string":
        return this.string(node);
      case "integer":
      case "number":
        return this.number(node);
      case "boolean":
        return g.primitive("boolean");
      case "null":
        return g.primitive("null");
      case "array":
        return this.array(node);
      case "object":
        return this.object(node);
      case "anyOf":
        return group(node.options.map((o) => this.named(o)));
      case "ref": {
        const name = `${this.prefix}-def-${sanitize(node.name)}`;
        if (!g.has(name)) {
          g.rule(name, "null"); // placeholder first, so recursive references terminate
          const target = this.graph.defs.get(node.name);
          if (target !== undefined) {
            const body = this.expression(target);
            this.charge(name, body, `#/$defs/${node.name}`);
            g.define(name, body);
          }
        }
        return name;
      }
      default:
        return node satisfies never;
    }
  }

  /** Composite expressions get their own rule, so alternatives and repetitions stay unambiguous. */
  private named(node: SchemaNode): string {
    const known = this.names.get(node);
    if (known !== undefined) return known;
    const expression = this.expression(node);
    const name = /^[a-z0-9-]+$/.test(expression) ? expression : this.rule(expression, "#");
    this.names.set(node, name);
    return name;
  }

  /** A pattern or a format shapes the content (lengths beside them are validated after generation). */
  private string(node: Extract<SchemaNode, { kind: "string" }>): string {
    const g = this.g;
    g.primitive("string");
    if (node.pattern !== undefined) {
      const { expression, repetitions } = patternGrammar(node.pattern, "char");
      return this.rule(`"\\"" ${expression} "\\""`, "#", repetitions);
    }
    if (node.format !== undefined) {
      for (const [name, body] of formatRules(node.format)) {
        if (g.has(name)) continue;
        this.charge(name, body, "#");
        this.meter.charge("repetitions", expandedRepetitions(body), "#");
        g.rule(name, body);
      }
      return this.rule(`"\\"" fmt-${node.format} "\\""`, "#");
    }
    if (node.minLength === 0 && node.maxLength === undefined) return "string";
    const max = node.maxLength === undefined ? "" : String(node.maxLength);
    return this.repeat(
      `string-${node.minLength}-${max === "" ? "x" : max}`,
      node.maxLength ?? node.minLength,
      `"\\"" char{${node.minLength},${max}} "\\""`,
    );
  }

  /**
   * Bounds by digit ranges; without bounds the shared primitive (at most 15 digits each side of the point); a
   * `multipleOf` with few multiples within the bounds, as the choice among them.
   */
  private number(node: Extract<SchemaNode, { kind: "integer" | "number" }>): string {
    const constraint = { integer: node.kind === "integer", lower: node.lower, upper: node.upper };
    const multiples =
      node.multipleOf === undefined ? undefined : enumeratedMultiples(constraint, node.multipleOf);
    if (multiples !== undefined) return this.rule(group(multiples.map((m) => literal(m))), "#");
    if (node.lower === undefined && node.upper === undefined) return this.g.primitive(node.kind);
    const numbers = new NumberGrammar();
    const expression = numbers.expression(constraint);
    if (expression === undefined) throw new Error("a numeric range without numbers passed the parser");
    return this.rule(expression, "#", numbers.repetitions);
  }

  private array(node: Extract<SchemaNode, { kind: "array" }>): string {
    this.g.primitive("ws");
    if (node.maxItems === 0) return '"[" ws "]"';
    if (node.prefix !== undefined) return this.tuple(node, node.prefix);
    const item = this.named(node.items);
    const restMin = Math.max(0, node.minItems - 1);
    const restMax = node.maxItems === undefined ? "" : String(node.maxItems - 1);
    let rest = `( "," ws ${item} )*`;
    if (restMin !== 0 || restMax !== "") {
      const body = `( "," ws ${item} ){${restMin},${restMax}}`;
      rest = this.repeat(
        `${item}-rep-${restMin}-${restMax === "" ? "x" : restMax}`,
        node.maxItems ?? restMin,
        body,
      );
    }
    const items = `${item} ${rest} ws`;
    return node.minItems === 0 ? `"[" ws ( ${items} )? "]"` : `"[" ws ${items} "]"`;
  }

  /**
   * `prefixItems`: item i is written with its own schema, the first `minItems` are required, later ones (nested
   * optional groups, linear in the tuple's length) may be left out; past the prefix, `items` with the rest of the
   * count bounds.
   */
  private tuple(node: Extract<SchemaNode, { kind: "array" }>, prefix: readonly SchemaNode[]): string {
    const max = node.maxItems ?? Number.POSITIVE_INFINITY;
    const count = Math.min(prefix.length, max);
    let tail = "";
    if (max > prefix.length) {
      const item = this.named(node.items);
      const restMin = Math.max(0, node.minItems - prefix.length);
      const restMax = node.maxItems === undefined ? "" : String(node.maxItems - prefix.length);
      const body = `( "," ws ${item} ){${restMin},${restMax}}`;
      tail =
        restMin === 0 && restMax === ""
          ? `( "," ws ${item} )*`
          : this.repeat(
              `${item}-rep-${restMin}-${restMax === "" ? "x" : restMax}`,
              node.maxItems ?? restMin,
              body,
            );
    }
    for (let i = count - 1; i >= 0; i--) {
      const rest = `${tail === "" ? "" : ` ${tail}`}${i === 0 ? " ws" : ""}`;
      const element = `${i === 0 ? "" : '"," ws '}${this.named(prefix[i] as SchemaNode)}${rest}`;
      tail = this.rule(i >= node.minItems ? `( ${element} )?` : element, "#");
    }
    return `"[" ws ${tail} "]"`;
  }

  /**
   * Declared properties only, in declared order (extra keys are never needed for a valid instance). Two chains of
   * named rules keep the text linear in the number of properties: `rest(i)` is properties i.. once one was written
   * (each with its leading comma), `first(i)` is properties i.. while none was written yet.
   */
  private object(node: Extract<SchemaNode, { kind: "object" }>): string {
    const g = this.g;
    g.primitive("ws");
    g.primitive("string");
    const properties = node.properties;
    if (properties.length === 0) {
      if (node.additional === false) return '"{" ws "}"';
      const value = this.named(node.additional);
      return `"{" ws ( string ":" ws ${value} ( "," ws string ":" ws ${value} )* ws )? "}"`;
    }
    const pairs = properties.map((p) => `${literal(JSON.stringify(p.name))} ":" ws ${this.named(p.schema)}`);
    const rest: string[] = new Array<string>(properties.length + 1).fill("");
    // rest(0) is never needed: the first property written has no comma.
    for (let i = properties.length - 1; i >= 1; i--) {
      const next = rest[i + 1] === "" ? "" : ` ${rest[i + 1]}`;
      const pair = `"," ws ${pairs[i]}`;
      rest[i] = this.rule(properties[i]?.required ? `${pair}${next}` : `( ${pair} )?${next}`, "#");
    }
    const first = (i: number): string => {
      const property = properties[i];
      if (property === undefined) return "";
      const next = rest[i + 1] === "" ? "" : ` ${rest[i + 1]}`;
      const withThis = `${pairs[i]}${next}`;
      if (property.required) return this.rule(withThis, "#");
      const without = first(i + 1);
      return this.rule(without === "" ? `( ${withThis} )?` : `${withThis} | ${without}`, "#");
    };
    return `"{" ws ${first(0)} ws "}"`;
  }
}

/** The rules llama.cpp expands a body's bounded repetitions into (`x{2,5}` is 5). */
function expandedRepetitions(body: string): number {
  let total = 0;
  for (const match of body.matchAll(/\{(\d+)(?:,(\d*))?\}/g)) total += Number(match[2] || match[1]);
  return total;
}

/** A GBNF string literal. */
export function literal(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Alternatives, identical ones once (llama.cpp would keep a parse stack for each copy). */
function group(alternatives: readonly string[]): string {
  const unique = [...new Set(alternatives)];
  return unique.length === 1 ? (unique[0] as string) : `( ${unique.join(" | ")} )`;
}

function sanitize(name: string): string {
  const clean = name
    .replace(/[^a-zA-Z0-9]+/g, "-")
    .replace(/^-|-$/g, "")
    .toLowerCase();
  return `${clean || "x"}-${hash(name)}`;
}

function hash(text: string): string {
  let h = 0;
  for (const ch of text) h = (h * 31 + (ch.codePointAt(0) ?? 0)) >>> 0;
  return h.toString(36);
}
