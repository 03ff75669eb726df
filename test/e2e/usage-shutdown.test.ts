// SIGTERM with requests in flight: they finish, new requests get 503 during the drain, the process exits 0, and
// after a restart on the same data dir every admitted request is in the usage totals. A response still on its way
// to a client that has not read it is delivered whole before the process exits.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import type { UsageTotals } from "../../src/usage/queries.js";
import { hearthCli, openaiClient, startServerProcess } from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
const STORY: OpenAI.ChatCompletionMessageParam[] = [
  { role: "user", content: "Write a very long story about a lighthouse keeper and the sea." },
];
const cleanups: (() => void)[] = [];

afterAll(() => {
  for (const cleanup of cleanups.reverse()) cleanup();
});

function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

async function chatStatus(url: string, apiKey: string): Promise<number> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: STORY, max_tokens: 2 }),
  });
  await response.text();
  return response.status;
}

describe("SIGTERM with requests in flight", () => {
  it("finishes them, refuses new ones with 503, exits 0, and the usage survives a restart", async () => {
    // This test is about the drain finishing its work, not about its bound (store-chaos tests that): on a loaded
    // machine the running requests may take longer than the default 25 s to end.
    const dir = mkdtempSync(join(tmpdir(), "hearth-shutdown-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, "hearth.yaml");
    writeFileSync(config, "server:\n  shutdownTimeoutMs: 300000\n");
    const server = await startServerProcess({ args: ["--config", config] });
    cleanups.push(() => rmSync(server.dataDir, { recursive: true, force: true }));
    cleanups.push(() => server.child.kill("SIGKILL"));
    const client = openaiClient(server);

    // One non-streamed request and three streams, all admitted and generating before the signal.
    const whole = client.chat.completions.create({ model: MODEL, messages: STORY, max_tokens: 60 });
    const streams = await Promise.all(
      [0, 1, 2].map(() =>
        client.chat.completions.create({
          model: MODEL,
          messages: STORY,
          max_tokens: 100,
          stream: true,
          stream_options: { include_usage: true },
        }),
      ),
    );
    const iterators = streams.map((s) => s[Symbol.asyncIterator]());
    for (const iterator of iterators) {
      let first = await iterator.next();
      while (!first.done && !first.value.choices[0]?.delta.content) first = await iterator.next();
      expect(first.done).toBe(false);
    }

    const exited = exitOf(server.child);
    server.child.kill("SIGTERM");
    // The drain has begun once /health says so; new chat completions are refused with a retryable 503.
    const deadline = Date.now() + 10_000;
    while ((await fetch(`${server.url}/health`)).status !== 503) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await chatStatus(server.url, server.apiKey)).toBe(503);
    const refused = await client.chat.completions
      .create({ model: MODEL, messages: STORY, max_tokens: 2 })
      .then(
        () => undefined,
        (err: { status?: number; code?: string }) => err,
      );
    expect(refused).toMatchObject({ status: 503, code: "engine_overloaded" });

    // The running requests finish normally, with their usage.
    const usages: OpenAI.CompletionUsage[] = [];
    let contentAfterRefusal = 0;
    for (const iterator of iterators) {
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | undefined;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        if (next.value.choices[0]?.delta.content) contentAfterRefusal++;
        finish = next.value.choices[0]?.finish_reason ?? finish;
        usage = next.value.usage ?? usage;
      }
      expect(finish).toMatch(/^(stop|length)$/);
      expect(usage?.completion_tokens).toBeGreaterThan(0);
      if (usage !== undefined) usages.push(usage);
    }
    const completion = await whole;
    expect(completion.choices[0]?.finish_reason).toMatch(/^(stop|length)$/);
    if (completion.usage !== undefined) usages.push(completion.usage);
    expect(usages).toHaveLength(4);
    // The streams were still generating while new requests were refused.
    expect(contentAfterRefusal).toBeGreaterThan(0);
    expect(await exited).toBe(0);

    // Same data dir, new process: every admitted request is in the totals, none of the refused ones.
    const again = await startServerProcess({ dataDir: server.dataDir, bootstrap: false });
    cleanups.push(() => again.child.kill("SIGKILL"));
    const { stdout } = await hearthCli(again, ["usage", "--org", "default", "--json"]);
    const totals = JSON.parse(stdout) as UsageTotals;
    const sum = (pick: (u: OpenAI.CompletionUsage) => number) => usages.reduce((n, u) => n + pick(u), 0);
    expect(totals).toMatchObject({
      requests: 4,
      prompt_tokens: sum((u) => u.prompt_tokens),
      completion_tokens: sum((u) => u.completion_tokens),
      cached_tokens: sum((u) => u.prompt_tokens_details?.cached_tokens ?? 0),
      total_tokens: sum((u) => u.total_tokens),
      aborted: 0,
      errors: 0,
    });
    expect(await again.stop()).toBe(0);
  });
});

/** More than the socket buffers of both ends hold: most of the answer waits in the server process. */
const BIG_CONTENT_CHARS = 32 * 1024 * 1024;

/** An OpenAI-compatible upstream whose every answer is one streamed delta of BIG_CONTENT_CHARS, sent at once. */
async function bigAnswerUpstream(): Promise<{ url: string; close: () => void }> {
  const content = "x".repeat(BIG_CONTENT_CHARS);
  const event = (body: object) =>
    `data: ${JSON.stringify({ id: "up-1", object: "chat.completion.chunk", created: 1, model: "big", ...body })}\n\n`;
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "big", object: "model", owned_by: "test" }] }));
      return;
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(
        event({ choices: [{ index: 0, delta: { role: "assistant", content }, finish_reason: null }] }),
      );
      res.write(event({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }));
      res.write(event({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } }));
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe("SIGTERM while a finished answer is still on its way", () => {
  it("delivers it whole to a client that reads it only after the generation ended, then exits 0", async () => {
    const upstream = await bigAnswerUpstream();
    cleanups.push(upstream.close);
    const dir = mkdtempSync(join(tmpdir(), "hearth-shutdown-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, "hearth.yaml");
    writeFileSync(
      config,
      [
        "server:",
        "  shutdownTimeoutMs: 300000",
        "models:",
        "  - id: big",
        "    upstream:",
        "      endpoints:",
        `        - url: ${upstream.url}`,
        "",
      ].join("\n"),
    );
    const server = await startServerProcess({ args: ["--config", config] });
    cleanups.push(() => rmSync(server.dataDir, { recursive: true, force: true }));
    cleanups.push(() => server.child.kill("SIGKILL"));
    // Serving once its probe has found the upstream endpoint.
    const ready = Date.now() + 30_000;
    while ((await fetch(`${server.url}/health`)).status !== 200) {
      expect(Date.now()).toBeLessThan(ready);
      await new Promise((r) => setTimeout(r, 50));
    }

    // The client takes the first bytes, then stops reading: the rest of the answer stays with the server.
    const send = () =>
      new Promise<IncomingMessage>((resolve, reject) => {
        const req = request(`${server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" },
        });
        req.on("response", resolve);
        req.on("error", reject);
        req.end(JSON.stringify({ model: "big", messages: [{ role: "user", content: "Hi" }], stream: true }));
      });
    // Under the whole suite's load this first request was refused twice with a 503 engine_overloaded right after
    // /health said 200 (most likely a probe of the stub, which answers from this busy process, missed its 1 s
    // timeout and the endpoint was ejected for a second; not confirmed). A 503 is sent again, as OpenAI's SDKs
    // send it again; the shutdown below is what this test is about.
    let response = await send();
    for (let attempt = 1; response.statusCode === 503 && attempt < 5; attempt++) {
      for await (const _ of response);
      await new Promise((r) => setTimeout(r, 1_000));
      response = await send();
    }
    if (response.statusCode !== 200) {
      const refused: Buffer[] = [];
      for await (const part of response) refused.push(part as Buffer);
      const upstreamLines = server
        .output()
        .split("\n")
        .filter((line) => line.includes("upstream"));
      expect.fail(
        `answered ${response.statusCode}: ${Buffer.concat(refused).toString()}\n${upstreamLines.join("\n")}`,
      );
    }
    const parts: Buffer[] = [];
    const body = new Promise<string>((resolve, reject) => {
      response.on("data", (part: Buffer) => parts.push(part));
      response.on("end", () => resolve(Buffer.concat(parts).toString()));
      response.on("error", reject);
      response.on("aborted", () => {
        const read = parts.reduce((n, part) => n + part.length, 0);
        reject(new Error(`the server cut the response after ${read} bytes`));
      });
    });
    body.catch(() => {}); // awaited below; a cut must not be an unhandled rejection meanwhile
    response.pause();

    // The upstream has sent everything: the generation is over, and the drain that SIGTERM starts finds no
    // generation running. Only the response is left, most of it not yet read by the client. The server stops
    // listening as it turns to its connections: read on only once it has (and a moment more).
    const exited = exitOf(server.child);
    server.child.kill("SIGTERM");
    const deadline = Date.now() + 10_000;
    while (
      await fetch(`${server.url}/health`).then(
        () => true,
        () => false,
      )
    ) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 1000));
    response.resume();

    const text = await body;
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    let received = 0;
    for (const line of text.split("\n")) {
      if (!line.startsWith("data: {")) continue;
      const chunk = JSON.parse(line.slice("data: ".length)) as OpenAI.ChatCompletionChunk;
      received += chunk.choices[0]?.delta.content?.length ?? 0;
    }
    expect(received).toBe(BIG_CONTENT_CHARS);
    expect(await exited).toBe(0);
  });
});
