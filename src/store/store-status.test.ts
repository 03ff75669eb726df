import { describe, expect, it } from "vitest";
import { StoreStatus, StoreUnavailableError } from "./store-status.js";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("StoreStatus", () => {
  it("answers many health checks with one ping per cache period", async () => {
    let now = 0;
    let pings = 0;
    const status = new StoreStatus(
      async () => {
        pings++;
      },
      { cacheMs: 1000, timeoutMs: 500, now: () => now },
    );
    const answers = await Promise.all(Array.from({ length: 50 }, () => status.check()));
    expect(answers.every((up) => up)).toBe(true);
    expect(pings).toBe(1);
    now += 999;
    await status.check();
    expect(pings).toBe(1);
    now += 1;
    await status.check();
    expect(pings).toBe(2);
    status.stop();
  });

  it("counts a ping that hangs as down once the timeout has passed, with one ping in flight", async () => {
    const hung = deferred();
    let pings = 0;
    const changes: boolean[] = [];
    const status = new StoreStatus(
      () => {
        pings++;
        return hung.promise;
      },
      { cacheMs: 0, timeoutMs: 30, onChange: (up) => changes.push(up) },
    );
    const checks = [status.check(), status.check(), status.check()];
    expect(pings).toBe(1);
    expect(await Promise.all(checks)).toEqual([false, false, false]);
    expect(status.available).toBe(false);
    expect(changes).toEqual([false]);
    status.stop();
    hung.resolve();
  });

  it("bounds a store call, and finds the store back by itself after a failure", async () => {
    let up = false;
    const status = new StoreStatus(
      async () => {
        if (!up) throw new Error("connection refused");
      },
      { cacheMs: 10, timeoutMs: 30 },
    );
    await expect(status.bounded(new Promise(() => {}))).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(status.bounded(Promise.resolve(7))).resolves.toBe(7);
    status.failed(new Error("connection refused"));
    expect(status.available).toBe(false);
    up = true;
    // The background probe, not a caller, notices the recovery.
    const deadline = Date.now() + 5000;
    while (!status.available && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(status.available).toBe(true);
    status.stop();
  });
});
