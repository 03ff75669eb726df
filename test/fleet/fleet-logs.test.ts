// What the gateway's log says when a worker dies mid-stream (kill -9 of a real `hearth serve` worker): the fault is
// handled as designed, so exactly one warn line naming the endpoint and the cause, no error-level line, no stack.
import { APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FLEET_MODEL, freePort, type Gateway, startGateway, startWorker } from "../support/fleet.js";
import { openaiClient, type ServerProcess } from "../support/server-process.js";

let port: number;
let worker: ServerProcess;
let gateway: Gateway;

beforeAll(async () => {
  port = await freePort();
  worker = await startWorker(port);
  gateway = await startGateway([{ port, apiKey: worker.apiKey }]);
});

afterAll(async () => {
  await gateway?.stop();
  await worker?.stop("SIGKILL");
});

interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** The JSON log lines of `text`; anything else (a stack frame, a banner) as a line of level -1. */
function logLines(text: string): LogLine[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      try {
        return JSON.parse(line) as LogLine;
      } catch {
        return { level: -1, msg: line };
      }
    });
}

describe("the gateway's log when a worker dies mid-stream", () => {
  it("is one warn line with the endpoint and the cause: no error-level line, no stack", async () => {
    const client = openaiClient(gateway.server);
    const stream = await client.chat.completions.create({
      model: FLEET_MODEL,
      messages: [{ role: "user", content: "Count from 1 to 500, separated by spaces." }],
      max_tokens: 400,
      temperature: 0,
      stream: true,
    });
    let before = 0;
    let chunks = 0;
    let error: unknown;
    try {
      for await (const _ of stream) {
        if (++chunks === 3) {
          before = gateway.server.output().length;
          worker.child.kill("SIGKILL");
        }
      }
    } catch (err) {
      error = err;
    }
    expect(chunks).toBeGreaterThanOrEqual(3);
    // The client learns in the stream that the upstream failed (retry), not of a bug of ours (a 500).
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).code).toBe("engine_overloaded");
    // Probes every 500 ms keep failing against the dead worker meanwhile: none of them may log again.
    await new Promise((resolve) => setTimeout(resolve, 2_000));

    const after = gateway.server.output().slice(before);
    const lines = logLines(after);
    const endpoint = `http://127.0.0.1:${port}/v1`;
    expect(
      lines.filter((l) => l.level >= 50 || l.level === -1),
      after,
    ).toEqual([]);
    expect(after).not.toMatch(/"stack"|\n\s+at /);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings, after).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      msg: "upstream stream failed after the first token",
      endpoint,
      cause: "connection reset",
      ejected: true,
      requestId: expect.stringMatching(/.+/),
    });
    expect(["UND_ERR_SOCKET", "ECONNRESET"]).toContain(warnings[0]?.code);
    expect(warnings[0]).not.toHaveProperty("err");
    // The response's own line says which error frame it ended with, at info level, under the same request id.
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 30,
        msg: "stream ended with an error frame",
        requestId: warnings[0]?.requestId,
        code: "engine_overloaded",
      }),
    );
  });
});
