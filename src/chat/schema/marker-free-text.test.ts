import { describe, expect, it } from "vitest";
import { GrammarBuilder } from "./gbnf.js";
import { acceptsText, markerAutomaton, markerFreeTextRule } from "./marker-free-text.js";

describe("marker-free text", () => {
  const hermes = markerAutomaton("<tool_call>");

  it("accepts text without the marker, also its prefixes and near misses", () => {
    for (const text of [
      "",
      "Sure, here is the weather.",
      "a < b and <tool",
      "ends in <tool_call",
      "<tool_cal> is not it",
      "<<tool_call",
      "<tool_<tool_call",
    ]) {
      expect(acceptsText(hermes, text), text).toBe(true);
    }
  });

  it("refuses the marker anywhere, also after a false start", () => {
    for (const text of [
      "<tool_call>",
      'Let me check.\n<tool_call>\n{"name"',
      "<<tool_call>",
      "<tool_<tool_call>x",
    ]) {
      expect(acceptsText(hermes, text), text).toBe(false);
    }
  });

  it("follows overlaps of the marker with itself (KMP), so no occurrence slips through", () => {
    const overlapping = markerAutomaton("abab");
    expect(acceptsText(overlapping, "ababab")).toBe(false);
    expect(acceptsText(overlapping, "abaabab")).toBe(false);
    expect(acceptsText(overlapping, "abaab aba")).toBe(true);
  });

  it("refuses each of several markers, following overlaps between them (Aho-Corasick)", () => {
    const think = markerAutomaton(["<think>", "</think>"]);
    for (const text of ["", "I think so.", "a <thin b </thin", "<think", "</think", "<</think", "think>"])
      expect(acceptsText(think, text), text).toBe(true);
    for (const text of ["<think>", "</think>", "x </think> y", "<<think>", "</<think>", "<</think>"])
      expect(acceptsText(think, text), text).toBe(false);
    const overlapping = markerAutomaton(["abc", "bcd"]);
    expect(acceptsText(overlapping, "abbcd")).toBe(false);
    expect(acceptsText(overlapping, "ab cd bc")).toBe(true);
  });

  it("writes one rule per state, escaping the marker's characters in the negated class", () => {
    const g = new GrammarBuilder();
    const start = markerFreeTextRule(g, "[TOOL_CALLS]", "rest");
    const grammar = g.build(start);
    expect(start).toBe("rest-0");
    for (let state = 0; state < "[TOOL_CALLS]".length; state++)
      expect(grammar).toContain(`rest-${state} ::=`);
    expect(grammar).toContain("[^\\x5bTOL\\x5fCAS\\x5d] rest-0");
    // The last state cannot read the closing "]".
    expect(grammar).not.toMatch(/rest-11 ::= [^\n]*"\]"/);
  });
});
