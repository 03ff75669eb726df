// The upstream HTTP client against a real local server: discarding an unread body never raises an uncaught error.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { isConnectionReset, UpstreamHttpClient, type UpstreamResponse } from "./http-client.js";

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

/**
 * Runs `test` against a local server that resets the socket of each request `answer` says to (by its 1-based
 * number) and answers the others, with a client of its own; `seen` counts the requests that reached the server.
 */
async function withResettingServer(
  answer: (n: number) => "reset" | "ok",
  test: (post: (signal?: AbortSignal) => Promise<UpstreamResponse>, seen: () => number) => Promise<void>,
): Promise<void> {
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
  const client = new UpstreamHttpClient();
  const post = (signal = new AbortController().signal) =>
    client.post(`http://127.0.0.1:${port}/v1/chat/completions`, {
      headers: { "content-type": "application/json" },
      body: "{}",
      signal,
    });
  try {
    await test(post, () => n);
  } finally {
    await client.close();
    server.close();
  }
}

describe("UpstreamHttpClient retries a reset connection once", () => {
  it("answers from a second connection when the first is reset before any answer", async () => {
    await withResettingServer(
      (n) => (n === 1 ? "reset" : "ok"),
      async (post, seen) => {
        const response = await post();
        expect(response.status).toBe(200);
        expect(await response.json()).toEqual({ ok: true });
        expect(seen()).toBe(2);
      },
    );
  });

  it("fails with the reset when the second connection is reset too, and tries no third", async () => {
    await withResettingServer(
      () => "reset",
      async (post, seen) => {
        const failure = await post().catch((err: unknown) => err);
        expect(isConnectionReset(failure)).toBe(true);
        expect(seen()).toBe(2);
      },
    );
  });

  it("does not retry a request its own signal aborted", async () => {
    await withResettingServer(
      () => "reset",
      async (post, seen) => {
        const controller = new AbortController();
        controller.abort();
        await expect(post(controller.signal)).rejects.toThrow();
        expect(seen()).toBe(0);
      },
    );
  });
});
