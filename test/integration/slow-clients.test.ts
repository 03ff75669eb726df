// Clients that hold connections without doing their part, over real sockets against the app on a real port: a
// stream whose reader stops reading, headers that never finish, more connections than the server takes.
import type { Server } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "../../src/http/server.js";
import { FAKE_MODEL, type FakeEngine, type FakeStep } from "../support/fake-engine.js";
import { startTestApp, type TestApp, usageRecordOf } from "../support/test-app.js";

const DRAIN_TIMEOUT_MS = 1_000;
/** Deltas of the long reply, each 16 KiB of text: 64 MiB in all, far beyond what socket buffers hold. */
const LONG_REPLY_DELTAS = 4_000;
const DELTA_TEXT = "x".repeat(16 * 1024);

let harness: TestApp<FakeEngine>;
let server: Server;
let port: number;

beforeAll(async () => {
  harness = await startTestApp({
    models: [{ id: FAKE_MODEL, parallel: 2, contextSize: 8192 }],
    server: { sseDrainTimeoutMs: DRAIN_TIMEOUT_MS },
  });
  ({ server, port } = await listen(harness.app.fetch, { ...harness.config.server, port: 0 }));
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await harness?.close();
});

async function until(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Resolves when the server has closed the socket; fails the test if it has not within 10 s. */
function closedByServer(socket: Socket): Promise<void> {
  return new Promise((resolve, reject) => {
    if (socket.closed) return resolve();
    const timer = setTimeout(() => reject(new Error("the server kept the connection open")), 10_000);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

const openConnections = (s: Server) =>
  new Promise<number>((resolve, reject) => s.getConnections((err, n) => (err ? reject(err) : resolve(n))));

async function busySequences(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`hearth_busy_sequences{model="${FAKE_MODEL}"}`));
  return Number(line?.split(" ")[1] ?? Number.NaN);
}

/** A raw HTTP/1.1 request for a streamed chat completion. */
function streamingRequest(maxTokens: number): string {
  const body = JSON.stringify({
    model: FAKE_MODEL,
    messages: [{ role: "user", content: "Talk for a long time." }],
    max_tokens: maxTokens,
    stream: true,
  });
  return [
    "POST /v1/chat/completions HTTP/1.1",
    `Host: 127.0.0.1:${port}`,
    `Authorization: Bearer ${harness.apiKey}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    "",
    body,
  ].join("\r\n");
}

/** Connects and sends `request`; resolves with the socket and the response head once it has arrived. */
function send(request: string): Promise<{ socket: Socket; head: string; received: () => string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(request));
    let text = "";
    let resolved = false;
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (!resolved && end >= 0) {
        resolved = true;
        resolve({ socket, head: text.slice(0, end), received: () => text });
      }
    });
    socket.on("error", reject);
  });
}

const longReply = (): FakeStep[] =>
  Array.from({ length: LONG_REPLY_DELTAS }, () => ({ type: "delta", text: DELTA_TEXT, tokens: 1 }) as const);

describe("a client that stops reading a stream", () => {
  it("pauses its generation, then loses its connection after the drain timeout; the sequence is freed and the usage recorded", async () => {
    harness.engine.replyOnce({ steps: longReply() });
    const before = harness.engine.tokensGenerated;
    const { socket, head, received } = await send(streamingRequest(LONG_REPLY_DELTAS + 10));
    // The 200 came (the request was admitted); from now on the client reads nothing.
    socket.pause();
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    const requestId = /x-request-id: (\S+)/i.exec(head)?.[1] ?? "";
    expect(await openConnections(server)).toBeGreaterThanOrEqual(1);

    // The server gives up on the connection and stops the generation long before the reply's end.
    await until("the server destroyed the connection", async () => (await openConnections(server)) === 0);
    await until("the sequence is free", async () => (await busySequences()) === 0);
    const generated = harness.engine.tokensGenerated - before;
    expect(generated).toBeGreaterThan(0);
    expect(generated).toBeLessThan(LONG_REPLY_DELTAS);
    const record = await usageRecordOf(harness, requestId);
    expect(record).toMatchObject({ status: "aborted", completionTokens: generated });

    // What reached the socket before it was destroyed ends without the stream's terminator.
    socket.resume();
    await new Promise((resolve) => socket.once("close", resolve));
    expect(received()).not.toContain("data: [DONE]");
  });

  it("still delivers a long stream whole to a client that reads it", async () => {
    const deltas = 300;
    harness.engine.replyOnce({ steps: longReply().slice(0, deltas) });
    const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${harness.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: FAKE_MODEL,
        messages: [{ role: "user", content: "Talk." }],
        max_tokens: deltas + 10,
        stream: true,
      }),
    });
    expect(response.status).toBe(200);
    const frames = (await response.text()).split("\n\n").filter((f) => f.startsWith("data: "));
    // The role chunk, one chunk per delta, the finish chunk, [DONE].
    expect(frames).toHaveLength(deltas + 3);
    expect(frames.at(-1)).toBe("data: [DONE]");
    await until("the sequence is free", async () => (await busySequences()) === 0);
  });
});

describe("the HTTP server's limits", () => {
  it("answers 408 and closes a connection whose headers do not arrive within headersTimeoutMs", async () => {
    const { server: strict, port: strictPort } = await listen(harness.app.fetch, {
      ...harness.config.server,
      port: 0,
      headersTimeoutMs: 300,
      requestTimeoutMs: 300,
    });
    try {
      const socket = connect(strictPort, "127.0.0.1", () =>
        socket.write(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: `),
      );
      let text = "";
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      await closedByServer(socket);
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      strict.closeAllConnections();
      await new Promise((resolve) => strict.close(resolve));
    }
  });

  it("closes connections beyond maxConnections at once, and serves those it holds", async () => {
    const { server: capped, port: cappedPort } = await listen(harness.app.fetch, {
      ...harness.config.server,
      port: 0,
      maxConnections: 2,
    });
    const open = (): Promise<Socket> =>
      new Promise((resolve) => {
        const socket = connect(cappedPort, "127.0.0.1", () => resolve(socket));
        socket.on("error", () => {});
      });
    try {
      const held = [await open(), await open()];
      await until("both connections are accepted", async () => (await openConnections(capped)) === 2);
      const extra = await open();
      await closedByServer(extra);
      expect(await openConnections(capped)).toBe(2);
      const first = held[0] as Socket;
      let text = "";
      first.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      first.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      await new Promise((resolve) => first.once("close", resolve));
      expect(text).toMatch(/^HTTP\/1\.1 200 /);
      for (const socket of held) socket.destroy();
    } finally {
      capped.closeAllConnections();
      await new Promise((resolve) => capped.close(resolve));
    }
  });
});
