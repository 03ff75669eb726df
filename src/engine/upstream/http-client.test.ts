// The upstream HTTP client against a real local server: discarding an unread body never raises an uncaught error.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { isConnectionReset, UpstreamHttpClient } from "./http-client.js";

const CLIENT = fileURLToPath(new URL("./http-client.ts", import.meta.url));

// In a process of its own: vitest's workers do not surface this uncaught error, a plain Node process does (and dies).
const SCRIPT = `
import { createServer } from "node:http";
import { UpstreamHttpClient } from ${JSON.stringify(CLIENT)};
process.on("uncaughtException", (error) => console.log("uncaught", error.code));
// A small complete error body (a tokenize route the engine lacks): the client reads the status only.
const server = createServer((_req, res) => {
  res.writeHead(404, { "content-type": "application/json" });
  res.end('{"error":"not found"}');
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const client = new UpstreamHttpClient();
const response = await client.post("http://127.0.0.1:" + server.address().port + "/tokenize", {
  headers: {}, body: "{}", signal: new AbortController().signal,
});
console.log("status", response.status);
response.discard();
await new Promise((resolve) => setTimeout(resolve, 200));
await client.close();
server.close();
console.log("end");
`;

describe("UpstreamHttpClient", () => {
  it("discard() of an unread body frees it without an uncaught error", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", SCRIPT],
      { timeout: 30_000 },
    );
    expect(stdout.trim().split("\n")).toEqual(["status 404", "end"]);
  });
});

/** A local server whose handler sees the request number (1-based) and may reset the socket instead of answering. */
async function serveResetting(
  answer: (n: number) => "reset" | "ok",
): Promise<{ url: string; close(): void; seen(): number }> {
  const { createServer } = await import("node:http");
  let n = 0;
  const server = createServer((req, res) => {
    n++;
    req.resume();
    if (answer(n) === "reset") {
      req.socket.resetAndDestroy();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/v1/chat/completions`, close: () => server.close(), seen: () => n };
}

describe("UpstreamHttpClient retries a reset connection once", () => {
  const post = (client: UpstreamHttpClient, url: string, signal = new AbortController().signal) =>
    client.post(url, { headers: { "content-type": "application/json" }, body: "{}", signal });

  it("answers from a second connection when the first is reset before any answer", async () => {
    const server = await serveResetting((n) => (n === 1 ? "reset" : "ok"));
    const client = new UpstreamHttpClient();
    try {
      const response = await post(client, server.url);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ ok: true });
      expect(server.seen()).toBe(2);
    } finally {
      await client.close();
      server.close();
    }
  });

  it("fails with the reset when the second connection is reset too, and tries no third", async () => {
    const server = await serveResetting(() => "reset");
    const client = new UpstreamHttpClient();
    try {
      const failure = await post(client, server.url).catch((err: unknown) => err);
      expect(isConnectionReset(failure)).toBe(true);
      expect(server.seen()).toBe(2);
    } finally {
      await client.close();
      server.close();
    }
  });

  it("does not retry a request its own signal aborted", async () => {
    const server = await serveResetting(() => "reset");
    const client = new UpstreamHttpClient();
    const controller = new AbortController();
    controller.abort();
    try {
      await expect(post(client, server.url, controller.signal)).rejects.toThrow();
      expect(server.seen()).toBe(0);
    } finally {
      await client.close();
      server.close();
    }
  });
});
