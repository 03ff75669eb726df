// `pattern` by grammar: the regular-expression subset OpenAI documents, parsed into a tree, written as GBNF for the
// string's content, its shortest match, and a matcher for the check after generation that never backtracks.

/**
 * The subset: literals and escaped punctuation, `.`, classes (`[a-z]`, `[^"]`, `\d \w \s \D \W \S`), groups
 * (`(...)`, `(?:...)`, `(?<name>...)`), alternation, quantifiers (`* + ? {n} {n,} {n,m}`, lazy or not), `^` at the
 * start and `$` at the end. Outside it (lookaround, backreferences, `\b`, Unicode properties, anchors elsewhere):
 * PatternError, a 400 for a strict schema, a hint otherwise.
 */
export type Regex =
  | { kind: "alt"; options: Regex[] }
  | { kind: "seq"; items: Regex[] }
  | { kind: "repeat"; item: Regex; min: number; max: number }
  | { kind: "set"; ranges: [number, number][]; negated: boolean };

export interface Pattern {
  regex: Regex;
  anchoredStart: boolean;
  anchoredEnd: boolean;
}

export class PatternError extends Error {
  override name = "PatternError";
}

/** Longest pattern accepted, and largest bound of a `{n,m}` quantifier. */
export const PATTERN_LIMITS = Object.freeze({ length: 1000, count: 1000 });

const DIGIT: [number, number][] = [[0x30, 0x39]];
const WORD: [number, number][] = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
];
const SPACE: [number, number][] = [
  [0x09, 0x0d],
  [0x20, 0x20],
];

export function parsePattern(source: string): Pattern {
  if (source.length > PATTERN_LIMITS.length) {
    throw new PatternError(`Patterns longer than ${PATTERN_LIMITS.length} characters are not supported.`);
  }
  let body = source;
  const anchoredStart = body.startsWith("^");
  if (anchoredStart) body = body.slice(1);
  // `$` ends the pattern unless escaped (an odd number of backslashes before it).
  const anchoredEnd = /(^|[^\\])(\\\\)*\$$/.test(body);
  if (anchoredEnd) body = body.slice(0, -1);
  const parser = new PatternParser(body);
  const regex = parser.alternatives();
  if (!parser.done()) throw new PatternError(`Unexpected '${parser.rest()[0]}' in the pattern.`);
  return { regex, anchoredStart, anchoredEnd };
}

class PatternParser {
  private i = 0;
  constructor(private readonly s: string) {}

  done(): boolean {
    return this.i >= this.s.length;
  }
  rest(): string {
    return this.s.slice(this.i);
  }

  alternatives(): Regex {
    const options = [this.sequence()];
    while (this.s[this.i] === "|") {
      this.i++;
      options.push(this.sequence());
    }
    return options.length === 1 ? (options[0] as Regex) : { kind: "alt", options };
  }

  private sequence(): Regex {
    const items: Regex[] = [];
    while (!this.done() && this.s[this.i] !== "|" && this.s[this.i] !== ")") {
      items.push(this.quantified(this.atom()));
    }
    return items.length === 1 ? (items[0] as Regex) : { kind: "seq", items };
  }

  private quantified(item: Regex): Regex {
    const c = this.s[this.i];
    let min: number;
    let max: number;
    if (c === "*" || c === "+" || c === "?") {
      this.i++;
      [min, max] =
        c === "*" ? [0, Number.POSITIVE_INFINITY] : c === "+" ? [1, Number.POSITIVE_INFINITY] : [0, 1];
    } else {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.rest());
      if (m === null) return item;
      this.i += m[0].length;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === "" ? Number.POSITIVE_INFINITY : Number(m[3]);
      if (min > PATTERN_LIMITS.count || (Number.isFinite(max) && max > PATTERN_LIMITS.count)) {
        throw new PatternError(`Quantifier bounds above ${PATTERN_LIMITS.count} are not supported.`);
      }
      if (max < min) throw new PatternError("A quantifier's maximum is below its minimum.");
    }
    if (this.s[this.i] === "?") this.i++; // lazy: the same language
    // llama.cpp refuses a grammar whose loop can go round without reading (left recursion through `(a*)*`).
    if (max === Number.POSITIVE_INFINITY && matchesEmpty(item)) {
      throw new PatternError(
        "An unbounded repetition of something that can match the empty string is not supported.",
      );
    }
    const next = this.s[this.i];
    if (next !== undefined && "*+?".includes(next)) {
      throw new PatternError("Possessive or doubled quantifiers are not supported.");
    }
    return { kind: "repeat", item, min, max };
  }

  private atom(): Regex {
    const c = this.s[this.i++] as string;
    switch (c) {
      case "(": {
        if (this.s[this.i] === "?") {
          const named = /^\?<[A-Za-z_][A-Za-z0-9_]*>/.exec(this.rest());
          if (this.s[this.i + 1] === ":") this.i += 2;
          else if (named !== null) this.i += named[0].length;
          else throw new PatternError("Lookaround and other '(?' groups are not supported.");
        }
        const inner = this.alternatives();
        if (this.s[this.i] !== ")") throw new PatternError("Unbalanced parenthesis in the pattern.");
        this.i++;
        return inner;
      }
      case ")":
        throw new PatternError("Unbalanced parenthesis in the pattern.");
      case "[":
        return this.set();
      case ".":
        return { kind: "set", ranges: [[0x0a, 0x0a]], negated: true };
      case "^":
      case "$":
        throw new PatternError(`'${c}' is only supported at the start ('^') or end ('$') of the pattern.`);
      case "*":
      case "+":
      case "?":
      case "{":
        if (c === "{" && !/^\d/.test(this.rest())) return char(c.codePointAt(0) as number);
        throw new PatternError(`Nothing to repeat before '${c}'.`);
      case "\\":
        return this.escape(false);
      default: {
        const code = this.s.codePointAt(this.i - 1) as number;
        if (code > 0xffff) this.i++;
        return char(code);
      }
    }
  }

  /** After a backslash: a class escape or one character. */
  private escape(inSet: boolean): Regex {
    const e = this.s[this.i++];
    if (e === undefined) throw new PatternError("The pattern ends with a backslash.");
    const classes: Record<string, [[number, number][], boolean]> = {
      d: [DIGIT, false],
      D: [DIGIT, true],
      w: [WORD, false],
      W: [WORD, true],
      s: [SPACE, false],
      S: [SPACE, true],
    };
    const cls = classes[e];
    if (cls !== undefined) return { kind: "set", ranges: cls[0], negated: cls[1] };
    const controls: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11, 0: 0 };
    if (controls[e] !== undefined) return char(controls[e] as number);
    if (e === "x" || e === "u") {
      const width = e === "x" ? 2 : 4;
      const hex = this.s.slice(this.i, this.i + width);
      if (!new RegExp(`^[0-9a-fA-F]{${width}}$`).test(hex)) throw new PatternError(`Bad '\\${e}' escape.`);
      this.i += width;
      return char(Number.parseInt(hex, 16));
    }
    if (e === "b" && inSet) return char(8);
    if (/[A-Za-z0-9]/.test(e)) throw new PatternError(`The escape '\\${e}' is not supported.`);
    return char(e.codePointAt(0) as number);
  }

  private set(): Regex {
    const negated = this.s[this.i] === "^";
    if (negated) this.i++;
    const ranges: [number, number][] = [];
    let first = true;
    while (this.s[this.i] !== "]" || first) {
      first = false;
      if (this.done()) throw new PatternError("Unterminated character class in the pattern.");
      const low = this.setMember();
      if (
        low.kind === "set" &&
        (low.negated || low.ranges.length !== 1 || low.ranges[0]?.[0] !== low.ranges[0]?.[1])
      ) {
        // A class escape inside a class: its ranges join (a negated one only as the whole class).
        if (low.negated) throw new PatternError("Negated class escapes inside '[...]' are not supported.");
        ranges.push(...low.ranges);
        continue;
      }
      const a = (low as Extract<Regex, { kind: "set" }>).ranges[0]?.[0] as number;
      if (this.s[this.i] === "-" && this.s[this.i + 1] !== "]" && this.i + 1 < this.s.length) {
        this.i++;
        const high = this.setMember();
        const b = high.kind === "set" && high.ranges.length === 1 ? (high.ranges[0]?.[0] as number) : -1;
        if (b < a) throw new PatternError("Bad range in a character class.");
        ranges.push([a, b]);
      } else ranges.push([a, a]);
    }
    this.i++;
    return { kind: "set", ranges, negated };
  }

  private setMember(): Regex {
    const c = this.s[this.i++] as string;
    if (c === "\\") return this.escape(true);
    const code = this.s.codePointAt(this.i - 1) as number;
    if (code > 0xffff) this.i++;
    return char(code);
  }
}

function matchesEmpty(re: Regex): boolean {
  switch (re.kind) {
    case "set":
      return false;
    case "seq":
      return re.items.every(matchesEmpty);
    case "alt":
      return re.options.some(matchesEmpty);
    case "repeat":
      return re.min === 0 || matchesEmpty(re.item);
    default:
      return re satisfies never;
  }
}

function char(code: number): Regex {
  return { kind: "set", ranges: [[code, code]], negated: false };
}

// --- GBNF ---

/** JSON string content needs no escape for these: the grammar writes only them from classes and `.`. */
const UNSAFE: [number, number][] = [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
];

/** The set's code points a grammar may write unescaped, as sorted disjoint ranges (negation resolved). */
function safeRanges(set: Extract<Regex, { kind: "set" }>): [number, number][] {
  const excluded = set.negated ? [...set.ranges, ...UNSAFE] : UNSAFE;
  const base: [number, number][] = set.negated ? [[0x20, 0x10ffff]] : set.ranges;
  let out: [number, number][] = base.map(([a, b]) => [a, b]);
  for (const [x, y] of excluded) {
    out = out.flatMap(([a, b]): [number, number][] => {
      if (y < a || x > b) return [[a, b]];
      const parts: [number, number][] = [];
      if (a < x) parts.push([a, x - 1]);
      if (y < b) parts.push([y + 1, b]);
      return parts;
    });
  }
  return out.sort((p, q) => p[0] - q[0]);
}

function classChar(code: number): string {
  if (/[A-Za-z0-9]/.test(String.fromCodePoint(code))) return String.fromCodePoint(code);
  return code <= 0xffff
    ? `\\u${code.toString(16).padStart(4, "0")}`
    : `\\U${code.toString(16).padStart(8, "0")}`;
}

/** A JSON-escaped literal for one character (`"` is written `\"` inside the JSON string). */
function jsonCharLiteral(code: number): string {
  const json = JSON.stringify(String.fromCodePoint(code)).slice(1, -1);
  let out = '"';
  for (const ch of json) out += ch === '"' || ch === "\\" ? `\\${ch}` : ch;
  return `${out}"`;
}

/** GBNF for the content of a JSON string matching the pattern; `any` is the rule of one JSON string character. */
export function patternGrammar(pattern: Pattern, any: string): { expression: string; repetitions: number } {
  let repetitions = 0;
  const write = (re: Regex): string => {
    switch (re.kind) {
      case "set": {
        if (!re.negated && re.ranges.length === 1 && re.ranges[0]?.[0] === re.ranges[0]?.[1]) {
          return jsonCharLiteral(re.ranges[0]?.[0] as number);
        }
        const ranges = safeRanges(re);
        if (ranges.length === 0)
          throw new PatternError("A character class of the pattern has no character a grammar can write.");
        return `[${ranges.map(([a, b]) => (a === b ? classChar(a) : `${classChar(a)}-${classChar(b)}`)).join("")}]`;
      }
      case "seq":
        return re.items.length === 0 ? '""' : `( ${re.items.map(write).join(" ")} )`;
      case "alt":
        return `( ${re.options.map(write).join(" | ")} )`;
      case "repeat": {
        const item = write(re.item);
        if (re.min === 0 && re.max === 1) return `${item}?`;
        if (re.max === Number.POSITIVE_INFINITY) {
          if (re.min === 0) return `${item}*`;
          if (re.min === 1) return `${item}+`;
          repetitions += re.min;
          return `${item}{${re.min},}`;
        }
        repetitions += re.max;
        return `${item}{${re.min},${re.max}}`;
      }
      default:
        return re satisfies never;
    }
  };
  const body = write(pattern.regex);
  const expression = [pattern.anchoredStart ? "" : `${any}*`, body, pattern.anchoredEnd ? "" : `${any}*`]
    .filter((part) => part !== "")
    .join(" ");
  return { expression, repetitions };
}

// --- shortest match and matching ---

/** The shortest string matching the pattern that the grammar can write. */
export function shortestMatch(pattern: Pattern): string {
  const shortest = (re: Regex): string => {
    switch (re.kind) {
      case "set": {
        if (!re.negated && re.ranges.length === 1 && re.ranges[0]?.[0] === re.ranges[0]?.[1]) {
          return String.fromCodePoint(re.ranges[0]?.[0] as number);
        }
        const first = safeRanges(re)[0];
        if (first === undefined)
          throw new PatternError("A character class of the pattern has no character a grammar can write.");
        // Prefer a letter or digit when the class has one: the most natural value.
        const preferred = [0x61, 0x41, 0x30].find((c) => safeRanges(re).some(([a, b]) => c >= a && c <= b));
        return String.fromCodePoint(preferred ?? first[0]);
      }
      case "seq":
        return re.items.map(shortest).join("");
      case "alt":
        return re.options.map(shortest).sort((a, b) => a.length - b.length)[0] ?? "";
      case "repeat":
        return shortest(re.item).repeat(re.min);
      default:
        return re satisfies never;
    }
  };
  return shortest(pattern.regex);
}

/**
 * Whether `value` matches (a search, as JSON Schema's `pattern` is, unless anchored). Sets of positions instead of
 * backtracking: the work is bounded by the value's length times the pattern's size per repetition level.
 */
export function matchesPattern(value: string, pattern: Pattern): boolean {
  const codes = [...value].map((c) => c.codePointAt(0) as number);
  const starts = pattern.anchoredStart ? new Set([0]) : new Set(codes.map((_, i) => i).concat(codes.length));
  const ends = run(pattern.regex, codes, starts);
  return pattern.anchoredEnd ? ends.has(codes.length) : ends.size > 0;
}

function run(re: Regex, s: number[], starts: Set<number>): Set<number> {
  switch (re.kind) {
    case "set": {
      const out = new Set<number>();
      for (const p of starts) {
        const c = s[p];
        if (c !== undefined && re.ranges.some(([a, b]) => c >= a && c <= b) !== re.negated) out.add(p + 1);
      }
      return out;
    }
    case "seq":
      return re.items.reduce((at, item) => (at.size === 0 ? at : run(item, s, at)), starts);
    case "alt": {
      const out = new Set<number>();
      for (const option of re.options) for (const e of run(option, s, starts)) out.add(e);
      return out;
    }
    case "repeat": {
      let frontier = starts;
      for (let i = 0; i < re.min && frontier.size > 0; i++) frontier = run(re.item, s, frontier);
      const out = new Set(frontier);
      for (let i = re.min; i < re.max && frontier.size > 0; i++) {
        const next = [...run(re.item, s, frontier)].filter((e) => !out.has(e));
        for (const e of next) out.add(e);
        frontier = new Set(next);
      }
      return out;
    }
    default:
      return re satisfies never;
  }
}
