// Load and unload times of both model families (SmolLM2, the default, and Gemma 3 270M), and node-llama-cpp's memory
// estimate against the resident memory (RSS) the load adds, in-process, for a few context shapes:
// `nice -n 19 node --import tsx bench/model-lifecycle.ts` (Gemma is pulled into the models cache on first use).
import { LlamaEngine } from "../src/engine/llama/llama-engine.js";
import { generationRequest } from "../test/support/generation-request.js";
import { GEMMA_MODEL, pullModel, SMOLLM2_MODEL } from "../test/support/models.js";

const SHAPES = [
  { parallel: 8, contextSize: 2048 },
  { parallel: 2, contextSize: 8192 },
  { parallel: 2, contextSize: 1024 },
];
const ROUNDS = 3;
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);

const families = [SMOLLM2_MODEL, GEMMA_MODEL];

for (const base of families) {
  const path = await pullModel(base);
  for (const shape of SHAPES) {
    const model = { ...base, ...shape, source: path };
    const engine = new LlamaEngine({ models: [model], resolveModelPath: async () => path });
    // The bindings and the library's one-time allocations first.
    await engine.loadModel(model.id);
    await engine.unloadModel(model.id);
    for (let round = 0; round < ROUNDS; round++) {
      const before = process.memoryUsage.rss();
      const t0 = performance.now();
      await engine.loadModel(model.id);
      const loadMs = performance.now() - t0;
      const runner = engine.runner(model.id);
      // One request touches the weights and the KV cache.
      const generation = await runner.enqueue(await runner.prepare(generationRequest(model.id)));
      for await (const _ of generation.events) {
        // drained
      }
      const grown = process.memoryUsage.rss() - before;
      const estimate = engine.health()[0]?.memory?.ramBytes ?? 0;
      const t1 = performance.now();
      await engine.unloadModel(model.id);
      const unloadMs = performance.now() - t1;
      console.log(
        `${base.id} ${shape.parallel}×${shape.contextSize}: load ${loadMs.toFixed(0)} ms, unload ${unloadMs.toFixed(0)} ms, ` +
          `estimate ${mib(estimate)} MiB, RSS growth ${mib(grown)} MiB, ratio ${(estimate / grown).toFixed(2)}`,
      );
    }
    await engine.dispose();
  }
}
