import { describe, expect, it } from "vitest";
import { Channel } from "./channel.js";

/** Whether the promise has settled by now (after pending microtasks). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => {
    done = true;
  });
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("Channel", () => {
  it("shows the producer how far its reader has fallen behind, and when it has caught up", async () => {
    const channel = new Channel<number>();
    for (let i = 0; i < 5; i++) channel.push(i);
    expect(channel.backlog).toBe(5);
    const caughtUp = channel.drained(2);
    expect(await settled(caughtUp)).toBe(false);
    const reader = channel[Symbol.asyncIterator]();
    await reader.next();
    await reader.next();
    expect(await settled(caughtUp)).toBe(false);
    await reader.next();
    expect(channel.backlog).toBe(2);
    expect(await settled(caughtUp)).toBe(true);
    expect(await settled(channel.drained(2))).toBe(true);
  });

  it("releases a waiting producer when the channel ends or its signal aborts", async () => {
    const channel = new Channel<number>();
    for (let i = 0; i < 3; i++) channel.push(i);
    const aborting = new AbortController();
    const aborted = channel.drained(0, aborting.signal);
    const ended = channel.drained(0);
    aborting.abort();
    expect(await settled(aborted)).toBe(true);
    expect(await settled(ended)).toBe(false);
    channel.close();
    expect(await settled(ended)).toBe(true);
  });
});
