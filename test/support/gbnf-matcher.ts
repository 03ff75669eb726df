// A small reader of the GBNF Hearth writes, for tests: whether a grammar admits a text, and random texts it admits.
// llama.cpp stays the authority (the model tests parse every grammar with it); this lets unit tests check many
// texts quickly, and sample instances to check against the constraint they should satisfy.

type Atom =
  | { kind: "literal"; text: string }
  | { kind: "class"; ranges: [number, number][]; negated: boolean }
  | { kind: "ref"; name: string }
  | { kind: "group"; alternatives: Item[][] };
interface Item {
  atom: Atom;
  min: number;
  max: number;
}

export class Gbnf {
  private readonly rules = new Map<string, Item[][]>();

  constructor(text: string) {
    for (const line of text.split("\n")) {
      const match = /^([a-zA-Z0-9-]+) ::= (.*)$/.exec(line);
      if (match === null) continue;
      const reader = new Reader(match[2] as string);
      this.rules.set(match[1] as string, reader.alternatives());
      if (!reader.done()) throw new Error(`unparsed GBNF: ${reader.rest()}`);
    }
  }

  /** Whether the rule (default `root`) matches the whole text. */
  accepts(text: string, rule = "root"): boolean {
    const memo = new Map<string, Set<number>>();
    const codes = [...text].map((ch) => ch.codePointAt(0) as number);
    return this.matchRule(rule, codes, 0, memo).has(codes.length);
  }

  /** A random text of the rule; `random` in [0, 1). Repetitions stop early, so texts stay short. */
  sample(random: () => number, rule = "root"): string {
    return this.sampleAlternatives(this.body(rule), random, 0);
  }

  private body(name: string): Item[][] {
    const body = this.rules.get(name);
    if (body === undefined) throw new Error(`unknown rule ${name}`);
    return body;
  }

  private matchRule(name: string, s: number[], pos: number, memo: Map<string, Set<number>>): Set<number> {
    const key = `${name}@${pos}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    memo.set(key, new Set()); // left recursion never occurs in Hearth's grammars
    const ends = this.matchAlternatives(this.body(name), s, pos, memo);
    memo.set(key, ends);
    return ends;
  }

  private matchAlternatives(alts: Item[][], s: number[], pos: number, memo: Map<string, Set<number>>) {
    const ends = new Set<number>();
    for (const seq of alts) {
      let at = new Set([pos]);
      for (const item of seq) {
        const next = new Set<number>();
        for (const p of at) for (const e of this.matchItem(item, s, p, memo)) next.add(e);
        at = next;
        if (at.size === 0) break;
      }
      for (const e of at) ends.add(e);
    }
    return ends;
  }

  private matchItem(item: Item, s: number[], pos: number, memo: Map<string, Set<number>>): Set<number> {
    const ends = new Set<number>();
    if (item.min === 0) ends.add(pos);
    const seen = new Set<number>();
    let frontier = new Set([pos]);
    for (let count = 1; count <= item.max && frontier.size > 0; count++) {
      const next = new Set<number>();
      for (const p of frontier) for (const e of this.matchAtom(item.atom, s, p, memo)) next.add(e);
      if (count < item.min) {
        frontier = next;
        continue;
      }
      // Past the minimum, a position reached again adds nothing new: unbounded repetitions end.
      frontier = new Set([...next].filter((e) => !seen.has(e)));
      for (const e of next) {
        ends.add(e);
        seen.add(e);
      }
    }
    return ends;
  }

  private matchAtom(atom: Atom, s: number[], pos: number, memo: Map<string, Set<number>>): Set<number> {
    switch (atom.kind) {
      case "literal": {
        const codes = [...atom.text].map((ch) => ch.codePointAt(0) as number);
        return codes.every((c, i) => s[pos + i] === c) ? new Set([pos + codes.length]) : new Set();
      }
      case "class": {
        const c = s[pos];
        if (c === undefined) return new Set();
        const inside = atom.ranges.some(([a, b]) => c >= a && c <= b);
        return inside !== atom.negated ? new Set([pos + 1]) : new Set();
      }
      case "ref":
        return this.matchRule(atom.name, s, pos, memo);
      case "group":
        return this.matchAlternatives(atom.alternatives, s, pos, memo);
    }
  }

  private sampleAlternatives(alts: Item[][], random: () => number, depth: number): string {
    if (depth > 60) throw new Error("sampling too deep");
    const seq = alts[Math.floor(random() * alts.length)] as Item[];
    let out = "";
    for (const item of seq) {
      const max = Math.min(item.max, item.min + 6);
      let count = item.min;
      while (count < max && random() < 0.6) count++;
      for (let i = 0; i < count; i++) out += this.sampleAtom(item.atom, random, depth + 1);
    }
    return out;
  }

  private sampleAtom(atom: Atom, random: () => number, depth: number): string {
    switch (atom.kind) {
      case "literal":
        return atom.text;
      case "class": {
        if (!atom.negated) {
          const [a, b] = atom.ranges[Math.floor(random() * atom.ranges.length)] as [number, number];
          return String.fromCodePoint(a + Math.floor(random() * (b - a + 1)));
        }
        for (;;) {
          const c = 0x20 + Math.floor(random() * 0x5f);
          if (!atom.ranges.some(([a, b]) => c >= a && c <= b)) return String.fromCodePoint(c);
        }
      }
      case "ref":
        return this.sampleAlternatives(this.body(atom.name), random, depth);
      case "group":
        return this.sampleAlternatives(atom.alternatives, random, depth);
    }
  }
}

class Reader {
  private i = 0;
  constructor(private readonly s: string) {}

  done(): boolean {
    this.space();
    return this.i >= this.s.length;
  }

  rest(): string {
    return this.s.slice(this.i);
  }

  alternatives(): Item[][] {
    const alts: Item[][] = [this.sequence()];
    while (this.peek() === "|") {
      this.i++;
      alts.push(this.sequence());
    }
    return alts;
  }

  private space(): void {
    while (this.s[this.i] === " ") this.i++;
  }

  private peek(): string | undefined {
    this.space();
    return this.s[this.i];
  }

  private sequence(): Item[] {
    const items: Item[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === "|" || c === ")") return items;
      const atom = this.atom();
      items.push({ atom, ...this.quantifier() });
    }
  }

  private atom(): Atom {
    const c = this.s[this.i];
    if (c === '"') {
      this.i++;
      let text = "";
      while (this.s[this.i] !== '"') text += this.char();
      this.i++;
      return { kind: "literal", text };
    }
    if (c === "[") {
      this.i++;
      const negated = this.s[this.i] === "^";
      if (negated) this.i++;
      const ranges: [number, number][] = [];
      while (this.s[this.i] !== "]") {
        const a = this.char().codePointAt(0) as number;
        if (this.s[this.i] === "-" && this.s[this.i + 1] !== "]") {
          this.i++;
          ranges.push([a, this.char().codePointAt(0) as number]);
        } else ranges.push([a, a]);
      }
      this.i++;
      return { kind: "class", ranges, negated };
    }
    if (c === "(") {
      this.i++;
      const alternatives = this.alternatives();
      if (this.peek() !== ")") throw new Error(`expected ) at ${this.rest()}`);
      this.i++;
      return { kind: "group", alternatives };
    }
    const name = /^[a-zA-Z0-9-]+/.exec(this.s.slice(this.i));
    if (name === null) throw new Error(`unexpected GBNF at ${this.rest()}`);
    this.i += name[0].length;
    return { kind: "ref", name: name[0] };
  }

  private char(): string {
    const c = this.s[this.i++] as string;
    if (c !== "\\") return c;
    const e = this.s[this.i++] as string;
    if (e === "n") return "\n";
    if (e === "r") return "\r";
    if (e === "t") return "\t";
    if (e === "x" || e === "u" || e === "U") {
      const width = e === "x" ? 2 : e === "u" ? 4 : 8;
      const code = Number.parseInt(this.s.slice(this.i, this.i + width), 16);
      this.i += width;
      return String.fromCodePoint(code);
    }
    return e;
  }

  private quantifier(): { min: number; max: number } {
    const c = this.s[this.i];
    if (c === "?") return this.skip({ min: 0, max: 1 });
    if (c === "*") return this.skip({ min: 0, max: Number.POSITIVE_INFINITY });
    if (c === "+") return this.skip({ min: 1, max: Number.POSITIVE_INFINITY });
    const m = /^\{(\d+)(,(\d*))?\}/.exec(this.s.slice(this.i));
    if (m === null) return { min: 1, max: 1 };
    this.i += m[0].length;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === "" ? Number.POSITIVE_INFINITY : Number(m[3]);
    return { min, max };
  }

  private skip<T>(value: T): T {
    this.i++;
    return value;
  }
}
