// A 413 ends the connection and says so. Found by the fuzz bench: the server answered an over-limit body with
// `Connection: keep-alive` but then closed the socket (it never reads the rest of a body it refused), so a client
// that reused the connection, as it was told it could, lost its next request ("other side closed"). The app is
// served over real HTTP here: only a socket shows what the connection does.
import { type AddressInfo, connect } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  let server: ServerType;
  let port: number;

  beforeAll(async () => {
    t = await startTestApp({ server: { maxBodyBytes: LIMIT } });
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: t.app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
    });
    port = (server.address() as AddressInfo).port;
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
});
