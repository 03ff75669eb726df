import { describe, expect, it } from "vitest";
import { FakeEngine } from "../../test/support/fake-engine.js";
import { generationRequest, greedySampling } from "../../test/support/generation-request.js";
import { UnknownModelError } from "./errors.js";
import { generate } from "./generate.js";
import { EngineRegistry } from "./registry.js";
import type { GenerationEvent, GenerationRequest } from "./types.js";

function request(model: string): GenerationRequest {
  return generationRequest(model, {
    messages: [{ role: "user", content: "hi" }],
    sampling: greedySampling({ maxTokens: 8 }),
    cacheScope: "org_1",
  });
}

async function text(events: AsyncIterable<GenerationEvent>): Promise<string> {
  let out = "";
  for await (const event of events) if (event.type === "delta") out += event.text;
  return out;
}

describe("EngineRegistry", () => {
  const embedded = () =>
    new FakeEngine({ models: [{ id: "local" }], reply: { steps: [{ type: "delta", text: "from local" }] } });
  const fleet = () =>
    new FakeEngine({
      models: [{ id: "gpu-a" }, { id: "gpu-b" }],
      reply: { steps: [{ type: "delta", text: "from the fleet" }] },
    });

  it("lists, reports health and load in the config's order, whichever engine serves a model", () => {
    const registry = new EngineRegistry([embedded(), fleet()], ["gpu-b", "local", "gpu-a"]);
    expect(registry.listModels().map((m) => m.id)).toEqual(["gpu-b", "local", "gpu-a"]);
    expect(registry.health().map((h) => h.model)).toEqual(["gpu-b", "local", "gpu-a"]);
    expect(registry.modelLoad().map((l) => l.model)).toEqual(["gpu-b", "local", "gpu-a"]);
  });

  it("sends each request to the engine that serves its model, and refuses an unknown one", async () => {
    const registry = new EngineRegistry([embedded(), fleet()], ["local", "gpu-a", "gpu-b"]);
    expect(await text((await generate(registry, request("local"))).events)).toBe("from local");
    expect(await text((await generate(registry, request("gpu-b"))).events)).toBe("from the fleet");
    await expect(registry.prepare(request("nope"))).rejects.toBeInstanceOf(UnknownModelError);
  });

  it("is ready only when every engine is, and says which model is not", () => {
    const loading = new FakeEngine({ models: [{ id: "local" }], ready: false });
    const registry = new EngineRegistry([loading, fleet()], ["local", "gpu-a", "gpu-b"]);
    expect(registry.isReady()).toBe(false);
    expect(registry.health().filter((h) => !h.ready)).toEqual([
      { model: "local", ready: false, detail: "loading" },
    ]);
    loading.setReady(true);
    expect(registry.isReady()).toBe(true);
  });

  it("refuses two engines serving one model id", () => {
    expect(() => new EngineRegistry([fleet(), fleet()], ["gpu-a", "gpu-b"])).toThrow(
      /two engines serve model gpu-a/,
    );
  });
});
