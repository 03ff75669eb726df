// The fast guard of the `fuzz` bench phase: 300 schema-aware mutated requests (the same seeded generator) against
// the whole app in memory with the fake engine. No response ≥ 500 other than 503, every error OpenAI-shaped, 200s
// whole, control-token text in content passed to the engine under the client's role and rendered as plain text by
// the default model's chat template, and the app still answering after.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPromptRenderer } from "../../src/chat/template/render.js";
import type { GenerationRequest } from "../../src/engine/types.js";
import { FAKE_MODEL, type FakeEngine } from "../support/fake-engine.js";
import { type FuzzCase, fuzzCases } from "../support/fuzz-requests.js";
import { checkResponse } from "../support/response-check.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

const COUNT = 300;
const SEED = 20_251_123;
const CHATML = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"];

// SmolLM2's template (the default model's): client text must land in plain segments, never become a turn marker.
const renderer = createPromptRenderer({
  template: readFileSync(join(import.meta.dirname, "../../src/chat/fixtures/smollm2.jinja"), "utf8"),
  bosToken: "<|im_start|>",
  eosToken: "<|im_end|>",
  specialTokens: CHATML,
});

function occurrences(text: string, token: string): number {
  return text.split(token).length - 1;
}

describe("fuzz: mutated chat-completion requests against the app", () => {
  let t: TestApp<FakeEngine>;
  // What the engine was last asked; read through a function, since the fake engine's callback sets it.
  const engineSaw: { request?: GenerationRequest | undefined } = {};
  const lastRequest = (): GenerationRequest | undefined => engineSaw.request;

  beforeAll(async () => {
    t = await startTestApp({
      models: [{ id: FAKE_MODEL, parallel: 4, maxQueue: 16 }],
      fake: {
        reply: (request) => {
          engineSaw.request = request;
          return {};
        },
      },
    });
  });

  afterAll(async () => {
    await t?.close();
  });

  async function send(fuzzCase: FuzzCase): Promise<ReturnType<typeof checkResponse>> {
    const response = await t.app.request("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${t.apiKey}`, "content-type": fuzzCase.contentType },
      body: fuzzCase.body,
    });
    return checkResponse(response.status, response.headers.get("content-type") ?? "", await response.text());
  }

  it("answers every case below 500 (or 503) with an OpenAI-shaped error or a whole 200, roles kept", async () => {
    const statuses = new Map<number, number>();
    const failures: string[] = [];
    let probes = 0;
    // Megabyte strings and 10,000 levels are the bench's; a few kB and 2,000 levels keep this file fast.
    for (const fuzzCase of fuzzCases({
      model: FAKE_MODEL,
      seed: SEED,
      count: COUNT,
      maxStringBytes: 64 * 1024,
      maxDepth: 2000,
    })) {
      engineSaw.request = undefined;
      const check = await send(fuzzCase);
      statuses.set(check.status, (statuses.get(check.status) ?? 0) + 1);
      const what = `case ${fuzzCase.index} (${fuzzCase.mutations.join(" + ")})`;
      if (check.status >= 500 && check.status !== 503) failures.push(`${what}: ${check.status}`);
      if (check.problem !== undefined) failures.push(`${what}: ${check.problem}`);
      const probe = fuzzCase.controlProbe;
      if (probe === undefined) continue;
      // A valid request: answered, and the engine got the client's messages as sent, role for role.
      expect(check.status, what).toBe(200);
      probes++;
      expect(
        lastRequest()?.messages.map((m) => ({ role: m.role, content: m.content })),
        what,
      ).toEqual(probe);
      const segments = renderer.render(lastRequest()?.messages ?? [], { enableThinking: false });
      const special = segments
        .filter((s) => s.special)
        .map((s) => s.text)
        .join("");
      const plain = segments
        .filter((s) => !s.special)
        .map((s) => s.text)
        .join("");
      // One turn marker per message, the default system turn when none leads, and the reply's: none from content.
      const turns = probe.length + (probe[0]?.role === "system" ? 0 : 1) + 1;
      expect(occurrences(special, "<|im_start|>"), what).toBe(turns);
      expect(occurrences(special, "<|im_end|>"), what).toBe(turns - 1);
      for (const message of probe) expect(plain, what).toContain(message.content.trim());
    }
    expect(failures).toEqual([]);
    // The generator must reach the paths it is meant to: refusals, admissions and probes all occur.
    expect(statuses.get(400) ?? 0).toBeGreaterThan(COUNT / 3);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(COUNT / 20);
    expect(probes).toBeGreaterThan(10);

    const health = await t.app.request("/health");
    expect(health.status).toBe(200);
    const normal = await t.chat({
      model: FAKE_MODEL,
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 4,
    });
    expect(normal.status).toBe(200);
  });
});
