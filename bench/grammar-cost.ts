// What a JSON grammar costs: decode tokens/s with and without JSON mode, in-process, on the same prompts.
import { pathToFileURL } from "node:url";
import { ensureModelFile } from "../src/catalogue/fetch.js";
import { loadConfig } from "../src/config/load.js";
import { generate } from "../src/engine/generate.js";
import { LlamaEngine } from "../src/engine/llama/llama-engine.js";
import type { GenerationRequest, OutputRequest } from "../src/engine/types.js";

const PROMPTS = [
  "Describe a cat as JSON.",
  "Give me a JSON object about the city of Paris.",
  "List three fruits and their colours in JSON.",
  "Write a JSON profile of a fictional person.",
  "Return a JSON config for a small web server.",
  "Summarise the water cycle as a JSON object.",
  "Give me a JSON shopping list for a picnic.",
  "Describe a car as a JSON object.",
];
const MAX_TOKENS = 48;
const JSON_MODE: OutputRequest = {
  format: { type: "json_object" },
  tools: [],
  toolChoice: "auto",
  parallelToolCalls: true,
};

interface Row {
  mode: string;
  temperature: number;
  concurrency: number;
  tokens: number;
  seconds: number;
}

async function run(
  engine: LlamaEngine,
  model: string,
  output: OutputRequest | undefined,
  temperature: number,
  concurrency: number,
): Promise<Row> {
  const prompts = PROMPTS.slice(0, concurrency);
  const started = performance.now();
  const counts = await Promise.all(
    prompts.map(async (content, i) => {
      const request: GenerationRequest = {
        model,
        messages: [{ role: "user", content }],
        enableThinking: false,
        n: 1,
        sampling: {
          temperature,
          topP: 1,
          frequencyPenalty: 0,
          presencePenalty: 0,
          seed: 1000 + i,
          maxTokens: MAX_TOKENS,
          stop: [],
        },
        cacheScope: "bench",
        ...(output === undefined ? {} : { output }),
      };
      const generation = await generate(engine, request);
      let tokens = 0;
      for await (const event of generation.events)
        if (event.type === "usage") tokens = event.usage.completionTokens;
      return tokens;
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return {
    mode: output === undefined ? "text" : "json_object",
    temperature,
    concurrency,
    tokens: counts.reduce((a, b) => a + b, 0),
    seconds,
  };
}

/** Tokens/s of free text vs JSON mode (greedy and sampled, 1 and 8 streams) as a Markdown table. */
export async function benchGrammarCost(): Promise<string> {
  const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
  const base = config.models[0];
  if (base === undefined) throw new Error("no model configured");
  const model = { ...base, parallel: 8, contextSize: 512 };
  const engine = new LlamaEngine({
    models: [model],
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
  await engine.start();
  const rows: Row[] = [];
  try {
    // Warm-up: compiles the grammar and loads the steering tables once, outside the timings.
    await run(engine, model.id, JSON_MODE, 0, 1);
    for (const temperature of [0, 1]) {
      for (const concurrency of [1, 8]) {
        // Interleaved, so a noisy minute hits both modes alike.
        rows.push(await run(engine, model.id, undefined, temperature, concurrency));
        rows.push(await run(engine, model.id, JSON_MODE, temperature, concurrency));
      }
    }
  } finally {
    await engine.dispose();
  }
  const lines = [
    `Grammar cost (max_tokens ${MAX_TOKENS}, same prompts, in-process engine)`,
    "",
    "| mode | temperature | streams | tokens | seconds | tokens/s | vs text |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const row of rows) {
    const rate = row.tokens / row.seconds;
    const text = rows.find(
      (r) => r.mode === "text" && r.temperature === row.temperature && r.concurrency === row.concurrency,
    );
    const ratio = text === undefined ? 1 : rate / (text.tokens / text.seconds);
    lines.push(
      `| ${row.mode} | ${row.temperature} | ${row.concurrency} | ${row.tokens} | ${row.seconds.toFixed(2)} | ${rate.toFixed(1)} | ${(ratio * 100).toFixed(0)}% |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchGrammarCost());
}
