import { describe, expect, it } from "vitest";
import { Arrivals } from "./arrivals.js";

describe("Arrivals", () => {
  it("counts requests from their preparation to their enqueue", () => {
    const arrivals = new Arrivals(20, () => 0);
    const a = {};
    const b = {};
    arrivals.expect(a);
    arrivals.expect(b);
    expect(arrivals.pending).toBe(2);
    arrivals.arrived(a);
    expect(arrivals.pending).toBe(1);
    arrivals.arrived(b);
    arrivals.arrived(b);
    expect(arrivals.pending).toBe(0);
  });

  it("stops counting a request that never arrives once its time is up, and forgets it", () => {
    let now = 0;
    const arrivals = new Arrivals(20, () => now);
    const stuck = {};
    arrivals.expect(stuck);
    now = 10;
    const late = {};
    arrivals.expect(late);
    expect(arrivals.pending).toBe(2);
    now = 20;
    expect(arrivals.pending).toBe(1);
    now = 30;
    expect(arrivals.pending).toBe(0);
    // Arriving after its time was up changes nothing.
    arrivals.arrived(stuck);
    expect(arrivals.pending).toBe(0);
  });

  it("counts a request prepared twice once, from its latest preparation", () => {
    let now = 0;
    const arrivals = new Arrivals(20, () => now);
    const request = {};
    arrivals.expect(request);
    now = 15;
    arrivals.expect(request);
    expect(arrivals.pending).toBe(1);
    now = 25;
    expect(arrivals.pending).toBe(1);
    now = 35;
    expect(arrivals.pending).toBe(0);
  });
});
