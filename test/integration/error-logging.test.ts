// Which failures the app logs at error level: a bug (an error nothing maps), never an expected refusal. Found by the
// soak bench: every 503 engine_overloaded of an overloaded server was logged as "unhandled error" with its stack,
// ~14 error lines a second that buried real faults and cost the refusal path a stack serialization each.
import { Writable } from "node:stream";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { QueueFullError, QueueTimeoutError } from "../../src/engine/errors.js";
import { UpstreamError } from "../../src/engine/upstream/upstream-error.js";
import { createLogger } from "../../src/observability/logger.js";
import { FAKE_MODEL, type FakeEngine, fail, say } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

interface LogLine {
  level: number;
  msg: string;
  requestId?: string;
  err?: unknown;
}

describe("error-level logging of failed requests", () => {
  let t: TestApp<FakeEngine>;
  const lines: LogLine[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer | string, _encoding, done) {
        for (const line of chunk.toString().split("\n"))
          if (line !== "") lines.push(JSON.parse(line) as LogLine);
        done();
      },
    });
    t = await startTestApp({ logger: createLogger("info", sink) });
  });

  afterAll(async () => {
    await t?.close();
  });

  beforeEach(() => {
    lines.length = 0;
  });

  const body = { model: FAKE_MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
  const errorLines = () => lines.filter((l) => l.level >= 50);

  it("logs no error for expected 503 refusals (queue full, queue timeout)", async () => {
    for (const enqueueError of [new QueueFullError(FAKE_MODEL), new QueueTimeoutError(FAKE_MODEL, 1000)]) {
      t.engine.replyOnce({ enqueueError });
      const response = await t.chat(body);
      expect(response.status).toBe(503);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("engine_overloaded");
    }
    expect(errorLines()).toEqual([]);
    // Each still has its request line, with its status (written once its response is on its way).
    await new Promise((resolve) => setImmediate(resolve));
    expect(
      lines.filter((l) => l.msg === "request" && (l as { status?: number }).status === 503),
    ).toHaveLength(2);
  });

  it("logs an error with the request id for a failure nothing maps (a bug: 500)", async () => {
    t.engine.replyOnce({ prepareError: new Error("a bug in the engine") });
    const response = await t.chat(body);
    expect(response.status).toBe(500);
    const requestId = response.headers.get("x-request-id");
    expect(errorLines()).toEqual([expect.objectContaining({ msg: "unhandled error", requestId })]);
  });

  it("logs no error for an expected failure after the 200 (an upstream that broke off): one info line", async () => {
    const broke = new UpstreamError("The upstream engine failed during the request.", 502, false, false);
    t.engine.replyOnce({ steps: [...say("partial").slice(0, 1), fail(broke)] });
    const response = await t.chat({ ...body, stream: true });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('"code":"engine_overloaded"');
    const requestId = response.headers.get("x-request-id");
    expect(errorLines()).toEqual([]);
    const framed = lines.filter((l) => l.msg === "stream ended with an error frame");
    expect(framed).toEqual([expect.objectContaining({ level: 30, requestId, code: "engine_overloaded" })]);
    expect(framed[0]).not.toHaveProperty("err");
  });

  it("logs an error with its stack for a failure nothing maps after the 200 (a bug)", async () => {
    t.engine.replyOnce({ steps: [...say("partial").slice(0, 1), fail(new Error("a bug in the decoder"))] });
    const response = await t.chat({ ...body, stream: true });
    expect(await response.text()).toContain('"code":"server_error"');
    const requestId = response.headers.get("x-request-id");
    expect(errorLines()).toEqual([
      expect.objectContaining({
        msg: "error during stream",
        requestId,
        err: expect.objectContaining({ stack: expect.stringContaining("a bug in the decoder") }),
      }),
    ]);
  });
});
