import { describe, expect, it } from "vitest";
import {
  MIN_PROMPT_TOKENS,
  PROMPT_STEPS,
  PrefillBudget,
  RARE_STRETCHES,
  STRETCH_WINDOW,
} from "./prefill-budget.js";

/** A machine whose step costs `fixed` ms plus `perToken` ms for each token in it. */
function machine(fixed: number, perToken: number) {
  return (generating: number, promptTokens: number) => fixed + perToken * (generating + promptTokens);
}

/** Steps of `generating` choices, the given prompt tokens each (0 = generation only), timed by `cost`. */
function run(
  budget: PrefillBudget,
  cost: (g: number, p: number) => number,
  generating: number,
  prompts: number[],
): void {
  for (const promptTokens of prompts)
    budget.record({ generating, promptTokens, ms: cost(generating, promptTokens) });
}

describe("PrefillBudget", () => {
  it("allows the whole chunk until it has measured a step", () => {
    const budget = new PrefillBudget({ maxChunk: 128, stretch: 1.4 });
    expect(budget.tokens(16)).toBe(128);
    expect(budget.allowance(16, 20)).toBe(128);
  });

  it("learns the prompt tokens that keep a step within the stretch", () => {
    const cost = machine(10, 1);
    const budget = new PrefillBudget({ maxChunk: 128, stretch: 1.4 });
    run(budget, cost, 16, [0, 0, 0, 64, 0, 64]);
    // A generation-only step of 16 costs 26 ms; 0.4 × 26 ms buys 10 prompt tokens at 1 ms each.
    expect(budget.tokens(16)).toBe(10);
    expect(cost(16, budget.tokens(16))).toBeLessThanOrEqual(1.4 * cost(16, 0));
    expect(cost(16, budget.tokens(16) + 1)).toBeGreaterThan(1.4 * cost(16, 0));
    // Fewer streams make a cheaper step: fewer tokens fit (the nearest count measured stands in until measured).
    expect(budget.tokens(4)).toBe(10);
    run(budget, cost, 4, [0]);
    // 0.4 × 14 ms buys 5 tokens, under the minimum.
    expect(budget.tokens(4)).toBe(MIN_PROMPT_TOKENS);
  });

  it("never goes under the minimum or over the chunk", () => {
    const slowPrompts = new PrefillBudget({ maxChunk: 128, stretch: 1.4 });
    run(slowPrompts, machine(1, 5), 1, [0, 32, 0, 32]);
    expect(slowPrompts.tokens(1)).toBe(MIN_PROMPT_TOKENS);
    const cheapPrompts = new PrefillBudget({ maxChunk: 128, stretch: 1.4 });
    run(cheapPrompts, machine(100, 0.01), 16, [0, 32, 0, 32]);
    expect(cheapPrompts.tokens(16)).toBe(128);
  });

  it("lets a few stretched steps in a window through, then holds prompts to the budget", () => {
    const cost = machine(10, 1);
    const budget = new PrefillBudget({ maxChunk: 128, stretch: 1.4 });
    run(budget, cost, 16, [0, 0, 0, 64]);
    const cheap = budget.tokens(16);
    // The step it learned from was within the budget it knew then (the whole chunk).
    for (let i = 0; i < RARE_STRETCHES; i++) {
      expect(budget.allowance(16, 20)).toBe(128);
      run(budget, cost, 16, [40]);
    }
    expect(budget.allowance(16, 20)).toBe(cheap);
    // Steps within the budget do not count; once the stretched ones leave the window, a whole chunk is allowed again.
    run(budget, cost, 16, new Array<number>(STRETCH_WINDOW - RARE_STRETCHES).fill(cheap));
    expect(budget.allowance(16, 20)).toBe(cheap);
    run(budget, cost, 16, [0]);
    expect(budget.allowance(16, 20)).toBe(128);
  });

  it("spreads a long prompt over a few steps, not over as many as the budget would take", () => {
    const cost = machine(10, 1);
    const budget = new PrefillBudget({ maxChunk: 128, stretch: 1.4 });
    run(budget, cost, 16, [0, 0, 64, 64, 64, 64]);
    expect(budget.tokens(16)).toBe(10);
    expect(budget.allowance(16, 30)).toBe(10);
    expect(budget.allowance(16, 200)).toBe(200 / PROMPT_STEPS);
    expect(budget.allowance(16, 4000)).toBe(128);
  });

  it("follows a machine that slows down", () => {
    const budget = new PrefillBudget({ maxChunk: 128, stretch: 1.5 });
    run(budget, machine(40, 1), 8, [0, 32]);
    // 0.5 × 48 ms buys 24 tokens at 1 ms each.
    expect(budget.tokens(8)).toBe(24);
    run(
      budget,
      machine(40, 2),
      8,
      new Array<number>(60).fill(0).map((_, i) => (i % 2 === 0 ? 0 : 32)),
    );
    // Each token now costs 2 ms, the generation-only step 56 ms: 0.5 × 56 ms buys 14.
    expect(Math.abs(budget.tokens(8) - 14)).toBeLessThanOrEqual(1);
  });

  it("with stretch 0 always allows the whole chunk", () => {
    const budget = new PrefillBudget({ maxChunk: 64, stretch: 0 });
    run(budget, machine(10, 1), 16, [0, 64, 0, 64, 64, 64, 64, 64]);
    expect(budget.tokens(16)).toBe(64);
    expect(budget.allowance(16, 20)).toBe(64);
  });

  it("ignores steps that generated nothing", () => {
    const budget = new PrefillBudget({ maxChunk: 128, stretch: 1.4 });
    run(budget, machine(10, 1), 0, [0, 512, 512]);
    expect(budget.tokens(16)).toBe(128);
  });
});
