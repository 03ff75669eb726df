import { describe, expect, it } from "vitest";
import { IdleSignal } from "./idle-signal.js";

/** Lets every pending promise callback run, but no timer. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("IdleSignal", () => {
  it("resolves at once when already idle", async () => {
    await expect(new IdleSignal(() => true).wait()).resolves.toBeUndefined();
  });

  it("resolves at the check after the last work ends, not before, and wakes every waiter", async () => {
    let working = 2;
    const idle = new IdleSignal(() => working === 0);
    const resolved: string[] = [];
    void idle.wait().then(() => resolved.push("a"));
    void idle.wait().then(() => resolved.push("b"));
    idle.check();
    working--;
    idle.check();
    await settle();
    expect(resolved).toEqual([]);
    working--;
    // Nothing wakes the waiters but a check: the owner calls it where work ends.
    await settle();
    expect(resolved).toEqual([]);
    idle.check();
    await settle();
    expect(resolved).toEqual(["a", "b"]);
  });

  it("a waiter that came after a wake waits for the next idle moment", async () => {
    let working = 1;
    const idle = new IdleSignal(() => working === 0);
    let first = false;
    void idle.wait().then(() => {
      first = true;
    });
    working = 0;
    idle.check();
    await settle();
    expect(first).toBe(true);
    working = 1;
    let second = false;
    void idle.wait().then(() => {
      second = true;
    });
    idle.check();
    await settle();
    expect(second).toBe(false);
    working = 0;
    idle.check();
    await settle();
    expect(second).toBe(true);
  });
});
