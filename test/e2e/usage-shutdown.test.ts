// SIGTERM with requests in flight: they finish, new requests get 503 during the drain, the process exits 0, and
// after a restart on the same data dir every admitted request is in the usage totals.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
