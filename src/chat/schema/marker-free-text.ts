// Text that never contains given markers, as a small automaton (testable as data) and as GBNF rules.
import type { GrammarBuilder } from "./gbnf.js";
import { literal } from "./gbnf.js";

/**
 * State i = the text ends with the i-th proper prefix of a marker (the longest such; state 0 is the empty prefix,
 * and for one marker state i is its first i characters) and holds no whole marker. `next[i]` maps the markers'
 * characters to the state they lead to; a character that would complete a marker has no entry (it is not allowed),
 * and any character outside the markers leads back to state 0.
 */
export interface MarkerAutomaton {
  next: ReadonlyMap<string, number>[];
  /** Every distinct character of the markers. */
  alphabet: readonly string[];
}

export function markerAutomaton(markers: string | readonly string[]): MarkerAutomaton {
  const words = (typeof markers === "string" ? [markers] : [...markers]).map((marker) => [...marker]);
  if (words.length === 0 || words.some((chars) => chars.length === 0))
    throw new Error("a marker needs at least one character");
  const alphabet = [...new Set(words.flat())];
  // Every proper prefix of a marker, shortest first (for one marker: state i is its first i characters).
  const prefixes: string[] = [];
  for (let length = 0; length < Math.max(...words.map((chars) => chars.length)); length++) {
    for (const chars of words) {
      const prefix = chars.slice(0, length).join("");
      if (length < chars.length && !prefixes.includes(prefix)) prefixes.push(prefix);
    }
  }
  const whole = words.map((chars) => chars.join(""));
  // After reading `c` in state `prefix`: refused when a marker ends here, else the longest suffix that is a
  // marker's proper prefix (Aho-Corasick's transition; KMP's for one marker).
  const step = (prefix: string, c: string): number | undefined => {
    const seen = [...prefix, c];
    if (whole.some((marker) => seen.join("").endsWith(marker))) return undefined;
    for (let start = 0; start <= seen.length; start++) {
      const index = prefixes.indexOf(seen.slice(start).join(""));
      if (index >= 0) return index;
    }
    return 0;
  };
  const next = prefixes.map((prefix) => {
    const row = new Map<string, number>();
    for (const c of alphabet) {
      const to = step(prefix, c);
      if (to !== undefined) row.set(c, to);
    }
    return row;
  });
  return { next, alphabet };
}

/** True when the automaton accepts `text` (i.e. `text` does not contain the marker). */
export function acceptsText(automaton: MarkerAutomaton, text: string): boolean {
  let state = 0;
  for (const c of text) {
    if (automaton.alphabet.includes(c)) {
      const to = automaton.next[state]?.get(c);
      if (to === undefined) return false;
      state = to;
    } else {
      state = 0;
    }
  }
  return true;
}

/**
 * Adds the rules of "any text, possibly empty, without any of `markers`" and returns the start rule's name. One rule
 * per state, right-recursive (llama.cpp does not grow its stacks on a reference at the end of an alternative).
 */
export function markerFreeTextRule(
  g: GrammarBuilder,
  markers: string | readonly string[],
  prefix: string,
): string {
  const automaton = markerAutomaton(markers);
  const name = (state: number) => `${prefix}-${state}`;
  const others = `[^${automaton.alphabet.map(classChar).join("")}] ${name(0)}`;
  automaton.next.forEach((row, state) => {
    const moves = [...row].map(([c, to]) => `${literal(c)} ${name(to)}`);
    g.rule(name(state), `( ${[...moves, others].join(" | ")} )?`);
  });
  return name(0);
}

/** A character inside a GBNF character class, hex-escaped unless alphanumeric (no `]`, `^`, `-` or `\\` surprises). */
function classChar(c: string): string {
  if (/^[a-zA-Z0-9]$/.test(c)) return c;
  const code = c.codePointAt(0) ?? 0;
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, "0")}`
    : `\\u${code.toString(16).padStart(4, "0")}`;
}
