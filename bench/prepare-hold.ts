// How long preparing one worst-case request holds the event loop on the real default model (the chat template
// render and the synchronous tokenize are its longest stretches), for the largest prompts the limits allow.
// `node --import tsx bench/prepare-hold.ts` prints a Markdown table.
import { performance } from "node:perf_hooks";
import { Template } from "@huggingface/jinja";
import { ensureModelFile } from "../src/catalogue/fetch.js";
import { loadConfig } from "../src/config/load.js";
import { requestLimitsSchema } from "../src/config/schema.js";
import { LlamaEngine } from "../src/engine/llama/llama-engine.js";
import type { ChatMessage } from "../src/engine/types.js";
import { generationRequest, greedySampling } from "../test/support/generation-request.js";

/**
 * Runs `work` while a setImmediate ticker watches the event loop: the longest gap between two ticks is the longest
 * stretch `work` held the loop (other requests could not run meanwhile).
 */
async function longestHold<T>(work: () => Promise<T>): Promise<{ result: T | Error; holdMs: number }> {
  let holdMs = 0;
  let last = performance.now();
  let ticking = true;
  const tick = () => {
    const now = performance.now();
    holdMs = Math.max(holdMs, now - last);
    last = now;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  let result: T | Error;
  try {
    result = await work();
  } catch (err) {
    result = err instanceof Error ? err : new Error(String(err));
  }
  ticking = false;
  tick();
  return { result, holdMs };
}

/**
 * Counts and times the chat template's renders on this thread (a prototype method, so every renderer's). Large
 * conversations render on the template thread (src/chat/template/thread.ts) and are not counted.
 */
function timeRenders(into: number[]): () => void {
  const original = Template.prototype.render;
  Template.prototype.render = function (this: Template, ...args: Parameters<Template["render"]>) {
    const start = performance.now();
    try {
      return original.apply(this, args);
    } finally {
      into.push(performance.now() - start);
    }
  };
  return () => {
    Template.prototype.render = original;
  };
}

/** Random CJK ideographs: about one token per character, the costliest text to tokenize per character. */
function ideographs(count: number): string {
  let text = "";
  for (let i = 0; i < count; i++) text += String.fromCharCode(0x4e00 + Math.floor(Math.random() * 2000));
  return text;
}

export async function prepareHold(): Promise<string> {
  const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
  const model = config.models[0];
  if (model === undefined) throw new Error("no default model");
  const limits = requestLimitsSchema.parse({});
  const engine = new LlamaEngine({
    models: [model],
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
  await engine.start();
  // The template's own text around one message (ChatML and SmolLM2's default system prompt) stays under the cap.
  const maxChars = model.contextSize * model.promptCharsPerToken - 200;
  const cases: [string, ChatMessage[]][] = [
    [
      "one message of English words at the character cap",
      [{ role: "user", content: "word ".repeat(maxChars / 5) }],
    ],
    ["one message of random CJK at the character cap", [{ role: "user", content: ideographs(maxChars) }]],
    [
      `${limits.maxMessages} short messages (refused: over the character cap)`,
      Array.from({ length: limits.maxMessages }, (_, i) => ({
        role: i % 2 === 0 ? "user" : "assistant",
        content: "hi there",
      })),
    ],
    [
      `one message of ${limits.maxPromptChars} characters (refused: over the character cap)`,
      [{ role: "user", content: "w".repeat(limits.maxPromptChars) }],
    ],
  ];
  const rows = [
    "| request | template renders on the event loop | longest event-loop hold, cold (ms) | warm, median of 5 (ms) | outcome |",
    "|---|---|---|---|---|",
  ];
  try {
    for (const [label, messages] of cases) {
      const request = generationRequest(model.id, {
        messages,
        sampling: greedySampling({ maxTokens: 1 }),
        cacheScope: "bench",
      });
      const holds: number[] = [];
      const renders: number[] = [];
      let outcome = "";
      for (let run = 0; run < 6; run++) {
        renders.length = 0;
        const restore = timeRenders(renders);
        const { result, holdMs } = await longestHold(() => engine.prepare(request));
        restore();
        holds.push(holdMs);
        outcome = result instanceof Error ? result.name : `${result.promptTokens} prompt tokens`;
      }
      const warm = holds.slice(1).sort((x, y) => x - y)[2] ?? 0;
      rows.push(
        `| ${label} | ${renders.length} | ${(holds[0] ?? 0).toFixed(1)} | ${warm.toFixed(1)} | ${outcome} |`,
      );
    }
  } finally {
    await engine.dispose();
  }
  return rows.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await prepareHold());
}
