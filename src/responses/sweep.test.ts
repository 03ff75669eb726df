// The periodic sweep of expired stored responses: runs on its timer, reports removals and failures, keeps going
// after a failure, never overlaps itself, and stops (waiting for a run under way) before the store closes.
import { describe, expect, it } from "vitest";
import { ResponsesSweep, sweepIntervalMs } from "./sweep.js";

const until = async (check: () => boolean, ms = 5000) => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe("ResponsesSweep", () => {
  it("sweeps hourly, or at half the retention when that is shorter (at least every second)", () => {
    expect(sweepIntervalMs(30 * 86_400_000)).toBe(3_600_000);
    expect(sweepIntervalMs(600_000)).toBe(300_000);
    expect(sweepIntervalMs(1000)).toBe(1000);
  });

  it("runs on its timer, reports what it removed and a failure, and carries on after one", async () => {
    const answers: (number | Error)[] = [3, new Error("store down"), 0, 2];
    const removed: number[] = [];
    const errors: unknown[] = [];
    let calls = 0;
    const sweep = new ResponsesSweep({
      removeExpired: async () => {
        const answer = answers[calls++] ?? 0;
        if (answer instanceof Error) throw answer;
        return answer;
      },
      intervalMs: 10,
      firstDelayMs: 1,
      onRemoved: (n) => removed.push(n),
      onError: (err) => errors.push(err),
    });
    try {
      await until(() => calls >= 4);
    } finally {
      await sweep.stop();
    }
    expect(removed.slice(0, 2)).toEqual([3, 2]);
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/store down/);
  });

  it("stop() waits for the run under way and no run starts after it", async () => {
    let release: () => void = () => {};
    let calls = 0;
    const sweep = new ResponsesSweep({
      removeExpired: () => {
        calls++;
        return new Promise<number>((resolve) => {
          release = () => resolve(1);
        });
      },
      intervalMs: 5,
      firstDelayMs: 1,
      onError: () => {},
    });
    await until(() => calls === 1);
    let stopped = false;
    const stopping = sweep.stop().then(() => {
      stopped = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(stopped).toBe(false);
    release();
    await stopping;
    await new Promise((r) => setTimeout(r, 30));
    expect(calls).toBe(1);
  });

  it("one run at a time: run() during a run joins it", async () => {
    let calls = 0;
    let release: () => void = () => {};
    const sweep = new ResponsesSweep({
      removeExpired: () => {
        calls++;
        return new Promise<number>((resolve) => {
          release = () => resolve(0);
        });
      },
      intervalMs: 60_000,
      onError: () => {},
    });
    const a = sweep.run();
    const b = sweep.run();
    expect(a).toBe(b);
    release();
    await a;
    await sweep.stop();
    expect(calls).toBe(1);
  });
});
