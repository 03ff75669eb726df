// Slot choice: the busy slots stay side by side; the longest same-scope prefix wins (copied beside them when it lies
// away); otherwise the cache worth least is overwritten (empty first, then the least recently used), so
// organizations taking turns keep their prefixes.
import { describe, expect, it } from "vitest";
import { chooseSlots, KEEP_SUFFIX, MIN_COPY_GAIN, type SlotView } from "./slot-choice.js";

const slot = (id: number, over: Partial<SlotView> = {}): SlotView => ({
  id,
  busy: false,
  tokens: [],
  scope: undefined,
  lastUsed: 0,
  ...over,
});

describe("chooseSlots", () => {
  it("takes the free slot holding the longest prefix of the same scope, never another scope's", () => {
    const slots = [
      slot(0, { tokens: [1, 2, 3, 4], scope: "b", lastUsed: 1 }),
      slot(1, { tokens: [1, 2, 9], scope: "a", lastUsed: 2 }),
      slot(2, { tokens: [1, 2, 3, 7], scope: "a", lastUsed: 3 }),
      // Beside none of them: no slot keeps the busy ones in fewer runs than another.
      slot(5, { busy: true }),
    ];
    expect(chooseSlots(slots, [1, 2, 3, 4, 5], "a", 1)).toEqual({ primary: 2, others: [], reusable: 3 });
    // Never the whole prompt: its last token is evaluated to get the logits.
    expect(chooseSlots(slots, [1, 2, 3, 4], "b", 1)).toEqual({ primary: 0, others: [], reusable: 3 });
  });

  it("without a prefix, overwrites an empty slot first, then the least recently used", () => {
    const used = [
      slot(0, { tokens: [5, 6], scope: "a", lastUsed: 3 }),
      slot(1, { tokens: [7, 8], scope: "b", lastUsed: 1 }),
      slot(2, { tokens: [9], scope: "c", lastUsed: 2 }),
    ];
    expect(chooseSlots([...used, slot(3)], [1, 2], "d", 1)?.primary).toBe(3);
    expect(chooseSlots(used, [1, 2], "d", 1)).toEqual({ primary: 1, others: [], reusable: 0 });
    // Copies for n > 1 go to the next cheapest slots.
    expect(chooseSlots(used, [1, 2], "d", 3)).toEqual({ primary: 1, others: [2, 0], reusable: 0 });
    expect(chooseSlots(used, [5, 6, 7], "a", 2)).toEqual({ primary: 0, others: [1], reusable: 2 });
  });

  it("two scopes taking turns on one pool keep both their prefixes", () => {
    const slots = [slot(0), slot(1), slot(2), slot(3)];
    let clock = 0;
    const reused: number[] = [];
    for (let turn = 0; turn < 6; turn++) {
      const scope = turn % 2 === 0 ? "direct" : "gateway";
      const prompt = [100, 200, 300, turn % 2];
      const choice = chooseSlots(slots, prompt, scope, 1);
      if (choice === undefined) throw new Error("no slot");
      reused.push(choice.reusable);
      slots[choice.primary] = slot(choice.primary, { tokens: prompt, scope, lastUsed: ++clock });
    }
    expect(reused).toEqual([0, 0, 3, 3, 3, 3]);
  });

  it("keeps a cache that goes on past the shared prefix: the prompt starts in another slot from a copy", () => {
    const system = Array.from({ length: 40 }, (_, i) => i);
    const question = (q: number) => Array.from({ length: KEEP_SUFFIX }, () => q);
    const held = slot(0, { tokens: [...system, ...question(1000)], scope: "a", lastUsed: 2 });
    const prompt = [...system, ...question(2000)];
    // Another conversation on the same system prompt: slot 0 is kept, slot 1 (empty) copies its prefix.
    expect(chooseSlots([held, slot(1), slot(2)], prompt, "a", 1)).toEqual({
      primary: 1,
      others: [],
      reusable: 40,
      source: { slot: 0, leased: true },
    });
    // n = 2 takes the two cheapest other slots.
    expect(chooseSlots([held, slot(1), slot(2)], prompt, "a", 2)).toEqual({
      primary: 1,
      others: [2],
      reusable: 40,
      source: { slot: 0, leased: true },
    });
    // No other free slot for the prompt: the held cache is overwritten past the prefix, as before.
    expect(chooseSlots([held, slot(1, { busy: true })], prompt, "a", 1)).toEqual({
      primary: 0,
      others: [],
      reusable: 40,
    });
  });

  it("lets a conversation's next turn go on in its own slot", () => {
    // The slot holds the last turn and its answer; the next prompt repeats all but the answer's last tokens.
    const turn = Array.from({ length: 60 }, (_, i) => i);
    const held = slot(0, { tokens: turn, scope: "a", lastUsed: 1 });
    const next = [...turn.slice(0, 58), 900, 901, 902];
    expect(chooseSlots([held, slot(1)], next, "a", 1)).toEqual({ primary: 0, others: [], reusable: 58 });
  });

  it("lets the same prompt again go on in its slot, past a long cached answer", () => {
    const prompt = Array.from({ length: 30 }, (_, i) => i);
    const answer = Array.from({ length: 100 }, (_, i) => 500 + i);
    const held = slot(0, { tokens: [...prompt, ...answer], scope: "a", lastUsed: 1 });
    expect(chooseSlots([held, slot(1)], prompt, "a", 1)).toEqual({ primary: 0, others: [], reusable: 29 });
  });

  it("copies the prefix of a busy slot that shares enough more than any free one", () => {
    const system = Array.from({ length: 30 }, (_, i) => i);
    const question = Array.from({ length: 20 }, (_, i) => 100 + i);
    const prompt = [...system, ...question];
    // Another request generating after the same prompt (its cache holds the prompt and what it generated so far).
    const generating = slot(0, { busy: true, tokens: [...prompt, 7, 8, 9], scope: "a" });
    const onSystem = slot(1, { tokens: [...system, 500, 501], scope: "a", lastUsed: 1 });
    // Into the slot beside the busy one, though another is empty: the two then decode in one ubatch.
    expect(chooseSlots([generating, onSystem, slot(2)], prompt, "a", 1)).toEqual({
      primary: 1,
      others: [],
      reusable: prompt.length - 1,
      source: { slot: 0, leased: false },
    });
    // n = 2: the next free slot too.
    expect(chooseSlots([generating, onSystem, slot(2)], prompt, "a", 2)).toEqual({
      primary: 1,
      others: [2],
      reusable: prompt.length - 1,
      source: { slot: 0, leased: false },
    });
    // Never another organization's, and never a busy slot whose request is still preparing (it shows no tokens).
    expect(chooseSlots([generating, slot(2)], prompt, "b", 1)).toEqual({
      primary: 2,
      others: [],
      reusable: 0,
    });
    const preparing = slot(0, { busy: true, tokens: [], scope: "a" });
    expect(chooseSlots([preparing, slot(2)], prompt, "a", 1)).toEqual({
      primary: 2,
      others: [],
      reusable: 0,
    });
  });

  it("copies from a busy slot only when that saves at least MIN_COPY_GAIN prompt tokens", () => {
    const system = Array.from({ length: 30 }, (_, i) => i);
    const prompt = [...system, ...Array.from({ length: 20 }, (_, i) => 100 + i)];
    const short = MIN_COPY_GAIN - 1;
    const generating = slot(0, { busy: true, tokens: [...prompt.slice(0, 30 + short), 999], scope: "a" });
    const onSystem = slot(1, { tokens: [...system, 500], scope: "a", lastUsed: 1 });
    // Seven tokens more than the free slot's prefix: not worth a copy of the whole sequence.
    expect(chooseSlots([generating, onSystem], prompt, "a", 1)).toEqual({
      primary: 1,
      others: [],
      reusable: 30,
    });
    const enough = slot(0, { busy: true, tokens: [...prompt.slice(0, 30 + MIN_COPY_GAIN), 999], scope: "a" });
    expect(chooseSlots([enough, onSystem], prompt, "a", 1)?.source).toEqual({ slot: 0, leased: false });
  });

  it("overwrites a cache another slot holds too before the least recently used one", () => {
    const prompt = (q: number) => [1, 2, 3, ...Array.from({ length: 12 }, () => q)];
    const slots = [
      // The least recently used: a prompt a client may ask for next.
      slot(0, { tokens: prompt(10), scope: "a", lastUsed: 1 }),
      // Twins: the same prompt and answer, once copied from a busy slot.
      slot(1, { tokens: prompt(20), scope: "a", lastUsed: 3 }),
      slot(2, { tokens: prompt(20), scope: "a", lastUsed: 2 }),
      // A copy in another organization is no twin.
      slot(3, { tokens: prompt(10), scope: "b", lastUsed: 4 }),
    ];
    expect(chooseSlots(slots, [9, 9], "c", 1)).toEqual({ primary: 2, others: [], reusable: 0 });
    expect(chooseSlots(slots, [9, 9], "c", 2)).toEqual({ primary: 2, others: [1], reusable: 0 });
    // A cache whose whole content a busy slot holds (it went on from a copy of it) goes first too.
    const extended = slot(4, { busy: true, tokens: [...prompt(10), 77, 78], scope: "a" });
    expect(
      chooseSlots([slots[0] as SlotView, extended, slot(8, { tokens: [4], lastUsed: 0 })], [9], "c", 1),
    ).toEqual({
      primary: 0,
      others: [],
      reusable: 0,
    });
  });

  it("keeps the busy slots side by side: beside them first, then joining two runs, before an empty slot", () => {
    const held = (id: number, lastUsed: number) => slot(id, { tokens: [7, 7], scope: "x", lastUsed });
    const busy = (id: number) => slot(id, { busy: true, tokens: [1], scope: "a" });
    // Slot 2 extends the run 0-1; slot 3 is empty and slot 5 older, but either would start a second run.
    expect(chooseSlots([busy(0), busy(1), held(2, 9), slot(3), held(5, 1)], [4, 4], "b", 1)?.primary).toBe(2);
    // Slot 1 joins the runs 0 and 2: one ubatch instead of two.
    expect(chooseSlots([busy(0), held(1, 9), busy(2), slot(3)], [4, 4], "b", 1)?.primary).toBe(1);
    // With nothing busy, the cheapest slot as before.
    expect(chooseSlots([held(0, 9), held(1, 9), slot(2)], [4, 4], "b", 1)?.primary).toBe(2);
  });

  it("copies a prefix held away from the busy slots into a slot beside them", () => {
    const system = Array.from({ length: 30 }, (_, i) => i);
    const prompt = [...system, 100, 101];
    const generating = slot(0, { busy: true, tokens: [55, 56], scope: "a" });
    const away = slot(5, { tokens: [...system, 200], scope: "a", lastUsed: 2 });
    expect(chooseSlots([generating, slot(1), away], prompt, "a", 1)).toEqual({
      primary: 1,
      others: [],
      reusable: 30,
      source: { slot: 5, leased: true },
    });
    // A prefix shorter than MIN_COPY_GAIN is not worth a copy: the slot beside evaluates the whole prompt.
    const short = slot(5, { tokens: [0, 1, 2, 999], scope: "a", lastUsed: 2 });
    expect(chooseSlots([generating, slot(1), short], prompt, "a", 1)).toEqual({
      primary: 1,
      others: [],
      reusable: 0,
    });
  });

  it("is undefined while fewer slots than asked for are free", () => {
    expect(chooseSlots([slot(0), slot(1, { busy: true })], [1], "a", 2)).toBeUndefined();
  });
});

describe("chooseSlots with a prompt_cache_key", () => {
  const system = [1, 2, 3];
  const chat = (q: number) => [...system, ...Array.from({ length: KEEP_SUFFIX + 2 }, (_, i) => q + i)];

  it("takes the slot its key last used when no slot shares a longer prefix", () => {
    const slots = [
      slot(0, { tokens: chat(100), scope: "a", key: "K", lastUsed: 1 }),
      slot(1, { tokens: chat(200), scope: "a", key: "L", lastUsed: 2 }),
    ];
    const prompt = chat(300);
    // Both share the system prompt: the key's slot wins the tie, and no other key's cache is overwritten for a copy.
    expect(chooseSlots(slots, prompt, "a", 1, "L")).toEqual({ primary: 1, others: [], reusable: 3 });
    // Without a key the least recently used slot is the copy source and the prompt goes on in the other.
    expect(chooseSlots(slots, prompt, "a", 1)).toEqual({
      primary: 1,
      others: [],
      reusable: 3,
      source: { slot: 0, leased: true },
    });
    // A longer prefix elsewhere still wins over the key.
    expect(chooseSlots(slots, [...chat(100).slice(0, 6), 7, 7], "a", 1, "L")?.primary).toBe(0);
  });

  it("overwrites other keys' caches last", () => {
    const slots = [
      slot(0, { tokens: [50, 51], scope: "a", key: "K", lastUsed: 1 }),
      slot(1, { tokens: [60, 61], scope: "a", lastUsed: 2 }),
      slot(2, { tokens: [70, 71], scope: "b", key: "M", lastUsed: 3 }),
    ];
    // Another organization's keyed request shares no prefix: the unkeyed slot goes, not the least recently used.
    expect(chooseSlots(slots, [9, 9], "c", 1, "N")).toEqual({ primary: 1, others: [], reusable: 0 });
    expect(chooseSlots(slots, [9, 9], "c", 2, "N")).toEqual({ primary: 1, others: [0], reusable: 0 });
    // Without a key: the least recently used, as before.
    expect(chooseSlots(slots, [9, 9], "c", 1)?.primary).toBe(0);
    // Only other keys' slots free: one of them is overwritten rather than waiting.
    expect(chooseSlots([slots[0] as SlotView, slots[2] as SlotView], [9, 9], "c", 1, "N")?.primary).toBe(0);
  });

  it("loads a stored state that shares at least MIN_COPY_GAIN more than any slot, into the cheapest free slots", () => {
    const system = Array.from({ length: 30 }, (_, i) => i);
    const prompt = [...system, ...Array.from({ length: 20 }, () => 500), 7];
    const slots = [
      slot(0, { tokens: [...system, 1, 2], scope: "a", lastUsed: 2 }),
      slot(1, { tokens: [...system, 3], scope: "a", lastUsed: 1 }),
      slot(2, { busy: true, tokens: [...system, ...Array.from({ length: 5 }, () => 500)], scope: "a" }),
    ];
    const stored = (shared: number) => () => ({ id: 42, shared });
    expect(chooseSlots(slots, prompt, "a", 1, undefined, stored(50))).toEqual({
      primary: 1,
      others: [],
      reusable: 50,
      restore: 42,
    });
    expect(chooseSlots(slots, prompt, "a", 2, undefined, stored(50))).toMatchObject({
      primary: 1,
      others: [0],
    });
    // Measured against the busy slot's prefix (35 tokens) too, not only the free ones' (30).
    expect(
      chooseSlots(slots, prompt, "a", 1, undefined, stored(35 + MIN_COPY_GAIN - 1))?.restore,
    ).toBeUndefined();
    expect(chooseSlots(slots, prompt, "a", 1, undefined, stored(35 + MIN_COPY_GAIN))?.restore).toBe(42);
    // The store is asked only once a lease can be made.
    let asked = 0;
    const busy = slots.map((s) => ({ ...s, busy: true }));
    const counted = () => {
      asked++;
      return { id: 1, shared: 50 };
    };
    expect(chooseSlots(busy, prompt, "a", 1, undefined, counted)).toBeUndefined();
    expect(asked).toBe(0);
  });

  it("an empty slot still goes before any held cache", () => {
    const slots = [slot(0, { tokens: [50], scope: "a", key: "N", lastUsed: 1 }), slot(1)];
    expect(chooseSlots(slots, [9, 9], "a", 1, "N")?.primary).toBe(1);
  });
});
