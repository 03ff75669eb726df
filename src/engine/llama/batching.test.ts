import type { BatchItem, Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import {
  countingStrategy,
  createRunnerStats,
  decodeThreads,
  priorityOf,
  sequenceOrderStrategy,
} from "./batching.js";

/** A queued evaluation of `tokens` tokens on sequence `sequence`. */
function item(sequence: number, tokens: number): BatchItem {
  return {
    tokens: Array.from({ length: tokens }, (_, i) => i as Token),
    logits: [],
    evaluationPriority: priorityOf(sequence),
  };
}

describe("sequenceOrderStrategy", () => {
  it("orders a batch by ascending sequence id, whatever order the evaluations were queued in", () => {
    const items = [item(3, 1), item(0, 1), item(2, 1), item(1, 1)];
    const batch = sequenceOrderStrategy({ items, size: 512 });
    expect(batch.map((b) => items.indexOf(b.item))).toEqual([1, 3, 2, 0]);
    expect(batch.map((b) => b.processAmount)).toEqual([1, 1, 1, 1]);
  });

  it("fills the batch up to its size and cuts the last item that does not fit whole", () => {
    const items = [item(0, 6), item(1, 6), item(2, 6)];
    const batch = sequenceOrderStrategy({ items, size: 10 });
    expect(batch.map((b) => [items.indexOf(b.item), b.processAmount])).toEqual([
      [0, 6],
      [1, 4],
    ]);
  });
});

describe("countingStrategy", () => {
  it("counts one decode per batch with tokens, and the tokens it carries", () => {
    const stats = createRunnerStats();
    const strategy = countingStrategy(stats);
    strategy({ items: [item(0, 1), item(1, 1), item(2, 1)], size: 512 });
    strategy({ items: [item(0, 700)], size: 512 });
    strategy({ items: [item(0, 188)], size: 512 });
    expect(stats).toMatchObject({ decodes: 3, decodedTokens: 3 + 512 + 188 });
  });

  it("counts the runs of consecutive sequence ids in each batch: the ubatches llama.cpp splits it into", () => {
    const stats = createRunnerStats();
    const strategy = countingStrategy(stats);
    strategy({ items: [item(5, 1), item(3, 1), item(4, 1)], size: 512 });
    expect(stats.sequenceRuns).toBe(1);
    strategy({ items: [item(3, 1), item(7, 1), item(9, 1), item(10, 1)], size: 512 });
    expect(stats.sequenceRuns).toBe(1 + 3);
    // An item left out of a full batch is not in it.
    strategy({ items: [item(0, 8), item(2, 1)], size: 8 });
    expect(stats.sequenceRuns).toBe(1 + 3 + 1);
  });

  it("does not count a batch without tokens (the library decodes nothing then)", () => {
    const stats = createRunnerStats();
    const batch = countingStrategy(stats)({ items: [item(0, 0)], size: 512 });
    expect(batch).toEqual([{ item: expect.anything(), processAmount: 0 }]);
    expect(stats.decodes).toBe(0);
  });

  it("returns the same batch as the plain strategy", () => {
    const items = [item(2, 3), item(0, 5), item(1, 9)];
    expect(countingStrategy(createRunnerStats())({ items, size: 12 })).toEqual(
      sequenceOrderStrategy({ items, size: 12 }),
    );
  });
});

describe("decodeThreads", () => {
  it("leaves a core to the main thread for a one-token decode when the threads take every core", () => {
    expect(decodeThreads(1, 2, 2)).toBe(1);
    expect(decodeThreads(1, 8, 8)).toBe(7);
  });

  it("keeps every configured thread for larger batches, a single thread, or threads fewer than the cores", () => {
    expect(decodeThreads(2, 2, 2)).toBe(2);
    expect(decodeThreads(16, 2, 2)).toBe(2);
    expect(decodeThreads(512, 8, 8)).toBe(8);
    expect(decodeThreads(1, 1, 2)).toBe(1);
    expect(decodeThreads(1, 1, 1)).toBe(1);
    expect(decodeThreads(1, 3, 8)).toBe(3);
  });

  it("is told each batch's tokens by countingStrategy, before its decode", () => {
    const told: number[] = [];
    const strategy = countingStrategy(createRunnerStats(), (tokens) => told.push(tokens));
    strategy({ items: [item(0, 1)], size: 512 });
    strategy({ items: [item(0, 1), item(1, 1)], size: 512 });
    strategy({ items: [item(0, 0)], size: 512 });
    expect(told).toEqual([1, 2]);
  });
});
