// The anchor's split of a server's CPU between its compute threads and the rest, read from /proc.
import { describe, expect, it } from "vitest";
import { splitThreadCpu, startThreadMeter } from "../../bench/cpu-noise.js";

describe("splitThreadCpu", () => {
  it("counts the busiest threads as compute and every other thread as the rest, in ms (10 ms ticks)", () => {
    expect(splitThreadCpu([3, 120, 0, 118, 7], 2)).toEqual({ computeMs: 2380, otherMs: 100 });
    expect(splitThreadCpu([5], 2)).toEqual({ computeMs: 50, otherMs: 0 });
  });
});

describe("startThreadMeter", () => {
  it("sees a thread of this process working, as compute when it is the busiest", () => {
    const meter = startThreadMeter(process.pid, 1);
    const until = performance.now() + 300;
    let spin = 0;
    while (performance.now() < until) spin++;
    const cpu = meter();
    expect(spin).toBeGreaterThan(0);
    // 300 ms of this thread's time, at tick resolution, and a scheduler that may take some of it away.
    expect(cpu?.computeMs).toBeGreaterThanOrEqual(150);
    expect(cpu?.otherMs).toBeGreaterThanOrEqual(0);
  });

  it("measures nothing for a process that is gone", () => {
    expect(startThreadMeter(2 ** 22 + 1, 2)()).toBeUndefined();
  });
});
