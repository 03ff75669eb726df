// Text that never contains a given marker, as a small automaton (testable as data) and as GBNF rules.
import type { GrammarBuilder } from "./gbnf.js";
import { literal } from "./gbnf.js";

/**
 * State i = the text ends with the marker's first i characters (and holds no whole marker). `next[i]` maps the
 * marker's characters to the state they lead to; a character that would complete the marker has no entry (it is
 * not allowed), and any character outside the marker leads back to state 0.
 */
export interface MarkerAutomaton {
  next: ReadonlyMap<string, number>[];
  /** Every distinct character of the marker. */
  alphabet: readonly string[];
}

export function markerAutomaton(marker: string): MarkerAutomaton {
  const chars = [...marker];
  if (chars.length === 0) throw new Error("a marker needs at least one character");
  const alphabet = [...new Set(chars)];
  // The longest prefix of the marker that the text ends with after reading `c` in state i (KMP's transition).
  const step = (i: number, c: string): number => {
    const seen = [...chars.slice(0, i), c];
    for (let length = Math.min(seen.length, chars.length); length > 0; length--) {
      if (seen.slice(seen.length - length).join("") === chars.slice(0, length).join("")) return length;
    }
    return 0;
  };
  const next = chars.map((_, i) => {
    const row = new Map<string, number>();
    for (const c of alphabet) {
      const to = step(i, c);
      if (to < chars.length) row.set(c, to);
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
 * Adds the rules of "any text, possibly empty, without `marker`" and returns the start rule's name. One rule per
 * state, right-recursive (llama.cpp does not grow its stacks on a reference at the end of an alternative).
 */
export function markerFreeTextRule(g: GrammarBuilder, marker: string, prefix: string): string {
  const automaton = markerAutomaton(marker);
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
