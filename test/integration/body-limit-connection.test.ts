// A 413 ends the connection and says so, and a client still sending the refused body reads it. Both found by the
// fuzz bench:
// - the server answered an over-limit body with `Connection: keep-alive` but then closed the socket (it never
//   reads the rest of a body it refused), so a client that reused the connection, as it was told it could, lost
//   its next request ("other side closed");
// - the socket was destroyed right after the 413 while the client was still uploading, so the client's next write
//   met a reset (EPIPE or ECONNRESET) and it never saw the 413 (src/http/server.ts, lingering close).
// The app is served over real HTTP, through the server's own `listen`: only a socket shows what the connection does.
import type { Server } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "../../src/http/server.js";
import { FAKE_MODEL, type FakeEngine } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

const LIMIT = 2048;

/** Writes raw HTTP on one connection and collects everything read until the server closes it (or 5 s pass). */
function exchange(port: number, writes: string[]): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closedByServer: false });
    }, 5000);
    socket.on("data", (d) => {
      text += d.toString();
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ text, closedByServer: true });
    });
    for (const w of writes) socket.write(w);
  });
}

describe("an over-limit body over real HTTP", () => {
  let t: TestApp<FakeEngine>;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    t = await startTestApp({ server: { maxBodyBytes: LIMIT } });
    ({ server, port } = await listen(t.app.fetch, { ...t.config.server, host: "127.0.0.1", port: 0 }));
  });

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await t?.close();
  });

  const head = (extra: string) =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.apiKey}\r\nContent-Type: application/json\r\n${extra}\r\n`;
  const small = JSON.stringify({
    model: FAKE_MODEL,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 2,
  });
  const big = JSON.stringify({
    model: FAKE_MODEL,
    messages: [{ role: "user", content: "a".repeat(LIMIT * 4) }],
  });

  it.each([
    ["a declared Content-Length over the limit", () => `${head(`Content-Length: ${big.length}\r\n`)}${big}`],
    [
      "a chunked body that grows over the limit",
      () => `${head("Transfer-Encoding: chunked\r\n")}${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`,
    ],
  ])("%s: 413 with Connection: close, and the connection ends", async (_, request) => {
    const { text, closedByServer } = await exchange(port, [request()]);
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text.toLowerCase()).toContain("\r\nconnection: close\r\n");
    expect(closedByServer).toBe(true);
  });

  it("requests after a 413 on pooled keep-alive connections are all answered", async () => {
    const url = `http://127.0.0.1:${port}/v1/chat/completions`;
    const init = (body: string): RequestInit => ({
      method: "POST",
      headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
      body,
    });
    for (let round = 0; round < 5; round++) {
      expect((await fetch(url, init(big))).status).toBe(413);
      for (let i = 0; i < 3; i++) expect((await fetch(url, init(small))).status).toBe(200);
    }
  });

  // The client writes its whole body, as HTTP clients do, and reads the answer after. Without the lingering close
  // its writes after the 413 met a reset and most rounds ended in EPIPE or ECONNRESET with no answer read.
  it("a client still sending a refused body reads its 413, not a reset", async () => {
    const body = Buffer.alloc(8 * 1024 * 1024, "a");
    for (let round = 0; round < 5; round++) {
      const outcome = await new Promise<{ text: string; error?: string }>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        let text = "";
        let error: string | undefined;
        socket.on("data", (d) => {
          text += d.toString();
        });
        socket.on("error", (err: NodeJS.ErrnoException) => {
          error = err.code ?? err.message;
        });
        socket.on("close", () => resolve({ text, ...(error === undefined ? {} : { error }) }));
        socket.write(head(`Content-Length: ${body.length}\r\n`));
        // In 64 KiB writes, each after the last one was taken, so the upload is still going when the 413 comes.
        let offset = 0;
        const next = () => {
          if (socket.destroyed) return;
          if (offset >= body.length) return;
          const chunk = body.subarray(offset, offset + 64 * 1024);
          offset += chunk.length;
          socket.write(chunk, (err) => {
            if (!err) setImmediate(next);
          });
        };
        next();
      });
      expect(outcome.error, `round ${round}: ${outcome.text.slice(0, 80)}`).toBeUndefined();
      expect(outcome.text).toMatch(/^HTTP\/1\.1 413 /);
    }
  });

  it("uploads over the limit through fetch all get their 413", async () => {
    const url = `http://127.0.0.1:${port}/v1/chat/completions`;
    const huge = JSON.stringify({
      model: FAKE_MODEL,
      messages: [{ role: "user", content: "a".repeat(8 * 1024 * 1024) }],
    });
    for (let round = 0; round < 5; round++) {
      const response = await fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
        body: huge,
      });
      expect(response.status).toBe(413);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("request_too_large");
    }
  });
});
