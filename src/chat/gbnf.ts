// GBNF (llama.cpp grammar) text for JSON values, JSON Schema instances, tool calls and reasoning blocks.
import type { CompiledSchema, SchemaNode } from "./json-schema.js";

/** Nesting allowed in free-form JSON (json_object, untyped schema parts): deeper is never needed and bounds the grammar. */
export const FREE_JSON_DEPTH = 6;
/** Digits of an integer part and of a fraction: JSON.parse reads every such number exactly enough, never as Infinity. */
const MAX_DIGITS = 15;

// Whitespace is bounded at every position: one space, or one newline and a little indentation. A model can
// therefore never spend its budget on runaway blank lines inside the JSON.
const PRIMITIVES: Readonly<Record<string, string>> = Object.freeze({
  ws: '( " " | "\\n" [ ]{0,16} )?',
  char: '[^"\\\\\\x00-\\x1f] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
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

  /** A rule whose instances are exactly the schema's (within the subset's bounds). */
  schema(compiled: CompiledSchema, prefix: string): string {
    const emitter = new SchemaEmitter(this, compiled, prefix);
    return emitter.rootRule();
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

class SchemaEmitter {
  constructor(
    private readonly g: GrammarBuilder,
    private readonly compiled: CompiledSchema,
    private readonly prefix: string,
  ) {}

  rootRule(): string {
    return this.g.rule(`${this.prefix}-root`, this.expression(this.compiled.root));
  }

  private expression(node: SchemaNode): string {
    const g = this.g;
    switch (node.kind) {
      case "any":
        return g.freeValue(1);
      case "literal":
        return group(node.values.map((v) => literal(JSON.stringify(v))));
      case "string": {
        g.primitive("string");
        if (node.minLength === 0 && node.maxLength === undefined) return "string";
        const max = node.maxLength === undefined ? "" : String(node.maxLength);
        return `"\\"" char{${node.minLength},${max}} "\\""`;
      }
      case "integer":
        return g.primitive("integer");
      case "number":
        return g.primitive("number");
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
          const target = this.compiled.defs.get(node.name);
          if (target !== undefined) g.define(name, this.expression(target));
        }
        return name;
      }
      default:
        return node satisfies never;
    }
  }

  /** Composite expressions get their own rule, so alternatives and repetitions stay unambiguous. */
  private named(node: SchemaNode): string {
    const expression = this.expression(node);
    if (/^[a-z0-9-]+$/.test(expression)) return expression;
    return this.g.rule(this.g.fresh(this.prefix), expression);
  }

  private array(node: Extract<SchemaNode, { kind: "array" }>): string {
    this.g.primitive("ws");
    if (node.maxItems === 0) return '"[" ws "]"';
    const item = this.named(node.items);
    const restMin = Math.max(0, node.minItems - 1);
    const restMax = node.maxItems === undefined ? "" : String(node.maxItems - 1);
    const rest =
      restMin === 0 && restMax === "" ? `( "," ws ${item} )*` : `( "," ws ${item} ){${restMin},${restMax}}`;
    const items = `${item} ${rest} ws`;
    return node.minItems === 0 ? `"[" ws ( ${items} )? "]"` : `"[" ws ${items} "]"`;
  }

  private object(node: Extract<SchemaNode, { kind: "object" }>): string {
    const g = this.g;
    g.primitive("ws");
    g.primitive("string");
    if (node.properties.length === 0) {
      if (node.additional === false) return '"{" ws "}"';
      const value = this.named(node.additional);
      return `"{" ws ( string ":" ws ${value} ( "," ws string ":" ws ${value} )* ws )? "}"`;
    }
    // Declared properties only, in declared order: extra keys are never needed for a valid instance.
    const pairs = node.properties.map(
      (p) => `${literal(JSON.stringify(p.name))} ":" ws ${this.named(p.schema)}`,
    );
    const base = g.fresh(this.prefix);
    // after(i): properties i.. when at least one was written (each needs a leading comma).
    const after = (i: number): string =>
      node.properties
        .slice(i)
        .map((p, k) => (p.required ? `"," ws ${pairs[i + k]}` : `( "," ws ${pairs[i + k]} )?`))
        .join(" ");
    // first(i): properties i.. when none was written yet.
    const first = (i: number): string => {
      const property = node.properties[i];
      if (property === undefined) return "";
      const name = `${base}-p${i}`;
      const withThis = `${pairs[i]} ${after(i + 1)}`.trim();
      if (property.required) return g.rule(name, withThis);
      const without = first(i + 1);
      return g.rule(name, without === "" ? `( ${withThis} )?` : `${withThis} | ${without}`);
    };
    const members = first(0);
    return `"{" ws ${members} ws "}"`;
  }
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

function group(alternatives: readonly string[]): string {
  return alternatives.length === 1 ? (alternatives[0] as string) : `( ${alternatives.join(" | ")} )`;
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
