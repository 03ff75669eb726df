import { describe, expect, it } from "vitest";
import { Channel } from "../engine/channel.js";
import type { GenerationEvent } from "../engine/types.js";
import type { Admission } from "../limits/types.js";
import { createLogger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import type { UsageMeter, UsageRecord } from "../usage/types.js";
import { Accounting, type MeteredRequest } from "./accounting.js";

function harness() {
  const records: UsageRecord[] = [];
  const settled: number[] = [];
  const meter: UsageMeter = {
    record: (r) => records.push(r),
    flush: async () => {},
    dispose: async () => {},
  };
  const metrics = new Metrics({ modelLoad: () => [] });
  const accounting = new Accounting({ usageMeter: meter, metrics, logger: createLogger("silent") });
  const admission: Admission = {
    snapshot: {},
    settle: async (tokens) => {
      settled.push(tokens);
    },
    refund: async () => {},
  };
  const abort = new AbortController();
  const request: MeteredRequest = {
    principal: { orgId: "org_1", orgName: "acme", keyId: "key_1", rpm: null, tpm: null },
    model: "m",
    requestId: "req_1",
    startedAt: performance.now(),
    admission,
    signal: abort.signal,
  };
  return { records, settled, accounting, request, abort, metrics };
}

const usage = (completionTokens: number): GenerationEvent => ({
  type: "usage",
  usage: { promptTokens: 10, completionTokens, cachedTokens: 4, reasoningTokens: 1 },
});

describe("Accounting", () => {
  it("records a finished request once with the engine's counts and settles prompt + completion tokens", async () => {
    const { records, settled, accounting, request } = harness();
    const engine = new Channel<GenerationEvent>();
    const metered = accounting.meter({ promptTokens: 10, events: engine }, request);
    engine.push({ type: "delta", choice: 0, text: "Hi" });
    engine.push({ type: "delta", choice: 0, text: "!" });
    engine.push({ type: "finish", choice: 0, reason: "stop" });
    engine.push(usage(2));
    engine.close();
    const seen: GenerationEvent[] = [];
    for await (const event of metered.events) seen.push(event);
    await accounting.settled();
    expect(seen.map((e) => e.type)).toEqual(["delta", "delta", "finish", "usage"]);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      orgId: "org_1",
      keyId: "key_1",
      model: "m",
      requestId: "req_1",
      promptTokens: 10,
      completionTokens: 2,
      reasoningTokens: 1,
      cachedTokens: 4,
      status: "completed",
      endpoint: "chat.completions",
    });
    expect(settled).toEqual([12]);
  });

  it("names the endpoint the request came through in its record", async () => {
    const { records, accounting, request } = harness();
    const engine = new Channel<GenerationEvent>();
    const metered = accounting.meter(
      { promptTokens: 10, events: engine },
      { ...request, endpoint: "responses" },
    );
    engine.push(usage(1));
    engine.close();
    for await (const _ of metered.events) {
      // read to the end
    }
    await accounting.settled();
    expect(records.map((r) => r.endpoint)).toEqual(["responses"]);
  });

  it("accounts for a request whose client stopped reading, with the tokens generated until the abort", async () => {
    const { records, settled, accounting, request, abort } = harness();
    const engine = new Channel<GenerationEvent>();
    const metered = accounting.meter({ promptTokens: 10, events: engine }, request);
    engine.push({ type: "delta", choice: 0, text: "partial" });
    const iterator = metered.events[Symbol.asyncIterator]();
    await iterator.next(); // the client read one chunk, then left
    abort.abort();
    engine.push(usage(3));
    engine.close();
    await accounting.settled();
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ status: "aborted", completionTokens: 3 });
    expect(settled).toEqual([13]);
  });

  it("records a generation that failed after admission as an error and passes the failure on", async () => {
    const { records, accounting, request } = harness();
    const engine = new Channel<GenerationEvent>();
    const metered = accounting.meter({ promptTokens: 10, events: engine }, request);
    engine.fail(new Error("decode failed"));
    const reading = (async () => {
      for await (const _ of metered.events) {
        // drain
      }
    })();
    await expect(reading).rejects.toThrow("decode failed");
    await accounting.settled();
    expect(records[0]).toMatchObject({ status: "error", promptTokens: 10, completionTokens: 0 });
  });
});
