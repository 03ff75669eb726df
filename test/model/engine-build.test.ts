// The tuned llama.cpp build on the real model: it serves when the engine cache has it (.ci/run builds it first with
// `hearth engine build`), /health and the engine say so, and each context keeps a persistent thread pool that a
// decode neither creates nor joins (the prebuilt binaries create and join their workers on every decode:
// test/model/engine-prebuilt.test.ts).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext, LlamaContextSequence, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { loadLlama } from "../../src/engine/llama/backend.js";
import {
  findEngineBuild,
  LLAMA_CPP_PATCHES,
  linkEngineBuild,
  nodeLlamaCppDir,
  planEngineBuild,
} from "../../src/engine/llama/engine-build.js";
import { engineBuildLogPath, selfCheck } from "../../src/engine/llama/engine-builder.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import { copySequenceState } from "../../src/engine/llama/llama-internals.js";
import { generatedText } from "../support/generation-request.js";
import { checkoutBundledLlamaCpp } from "../support/llama-cpp-bundle.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
const model = { ...base, parallel: 2, contextSize: 1024 };
const threads = () => readdirSync("/proc/self/task").length;
/** The tuned build itself (`auto` takes it too when it is cached). */
const TUNED = { build: "tuned", threadPoolPoll: undefined } as const;
/** One prompt per stream: their greedy continuations differ. */
const PROMPTS = ["Once upon a time", "The best way to cook rice is", "Dear diary, today I"];

beforeAll(async () => {
  if ((await findEngineBuild(planEngineBuild())) === undefined)
    throw new Error(
      "the tuned engine build is not in the engine cache: run `node bin/hearth.js engine build` first",
    );
});

describe("the tuned build", () => {
  it("keeps a pool and a decode thread per context: they outlive every decode and go with the context", async () => {
    const { llama, build } = await loadLlama(false, 2, TUNED);
    try {
      expect(build).toEqual({ build: "tuned", key: planEngineBuild().key });
      expect(llama.buildType).toBe("localBuild");
      const weights = await llama.loadModel({ modelPath: await ensureModelFile(model, config) });
      const before = threads();
      const context = await weights.createContext({ sequences: 1, contextSize: 512, threads: 2 });
      // Two threads: the calling thread and one pool worker.
      expect(threads()).toBe(before + 1);
      const sequence = context.getSequence();
      let tokens = 0;
      for await (const _ of sequence.evaluate(weights.tokenize("Once upon a time"), { temperature: 0 })) {
        if (++tokens === 16) break;
      }
      expect(tokens).toBe(16);
      // The decode thread started with the first decode (it is the pool's first worker); no decode made another.
      expect(threads()).toBe(before + 2);
      await context.dispose();
      // The pool and the decode thread go with their context.
      expect(threads()).toBe(before);
      await weights.dispose();
    } finally {
      await llama.dispose();
    }
  });
});

describe("a prefix copied between sequences on the tuned build (native/llama-cpp-stream-copy.diff)", () => {
  it("copies every cell the source uses, wherever it lies in its stream: the copy predicts as the source", async () => {
    const { llama } = await loadLlama(false, 2, TUNED);
    try {
      const weights = await llama.loadModel({ modelPath: await ensureModelFile(model, config) });
      // 1,024 cells per sequence, of which the source uses about a third: the copy takes the partial path.
      const context = await weights.createContext({
        sequences: 2,
        contextSize: 2 * 1024,
        flashAttention: true,
        threads: 2,
      });
      const [source, target] = [context.getSequence(), context.getSequence()];
      const text = "The lighthouse keeper climbed the stairs and looked out over the grey sea. ".repeat(24);
      const long = weights.tokenize(text);
      expect(long.length).toBeGreaterThan(300);
      // Cells 0-299 filled, then the first 260 tokens erased (the rest shifted to positions 0-39, in cells
      // 260-299), then 60 more tokens in the freed cells from 0 on: the source's last used cell lies far past
      // the 100 tokens it holds.
      await source.evaluateWithoutGeneratingNewTokens(long.slice(0, 300));
      await source.eraseContextTokenRanges([{ start: 0, end: 260 }]);
      const tail = weights.tokenize(
        " Then she wrote in her log book what she had seen that night, line by line.",
      );
      await source.evaluateWithoutGeneratingNewTokens([...tail, ...tail, ...tail, ...tail].slice(0, 60));
      const held = source.contextTokens.length;
      expect(held).toBe(100);
      expect(await copySequenceState(target, source, held)).toBe(true);
      expect(target.contextTokens).toEqual(source.contextTokens);
      // The next token's distribution from each, one sequence at a time (the same batch shape): the same KV
      // cache gives the same logits.
      const next = weights.tokenize(" The")[0] as Token;
      const distribution = async (sequence: LlamaContextSequence) => {
        const generator = sequence.evaluateWithMetadata([next], { probabilities: true }, { temperature: 0 });
        const first = await generator.next();
        await generator.return();
        if (first.done === true) throw new Error("no token");
        return [...first.value.probabilities.entries()].slice(0, 20);
      };
      const fromSource = await distribution(source);
      const fromCopy = await distribution(target);
      expect(fromCopy.map(([token]) => token)).toEqual(fromSource.map(([token]) => token));
      for (const [i, [, p]] of fromCopy.entries())
        expect(p).toBeCloseTo((fromSource[i] as [Token, number])[1], 5);
      await context.dispose();
      await weights.dispose();
    } finally {
      await llama.dispose();
    }
  });
});

type NativeCall = (...args: unknown[]) => unknown;

/**
 * Records, for each of the context's native draws, whether its promise was settled when the call returned; one
 * list per decode (the draws after it, up to the next).
 */
function watchDraws(context: LlamaContext): boolean[][] {
  const native = (context as unknown as { _ctx: { sampleToken: NativeCall; decodeBatch: NativeCall } })._ctx;
  const original = native.sampleToken;
  const decode = native.decodeBatch;
  const perDecode: boolean[][] = [];
  Object.defineProperty(native, "decodeBatch", {
    configurable: true,
    value(...args: unknown[]) {
      perDecode.push([]);
      return decode.apply(native, args);
    },
  });
  // The addon's methods are read-only on its prototype: an own property shadows it.
  Object.defineProperty(native, "sampleToken", {
    configurable: true,
    value(...args: unknown[]) {
      const promise = original.apply(native, args) as Promise<unknown>;
      const draws = perDecode.at(-1) as boolean[];
      let settled = false;
      const mark = () => {
        settled = true;
      };
      promise.then(mark, mark);
      // Runs after `mark` when the promise was settled before it was returned, before it otherwise.
      queueMicrotask(() => draws.push(settled));
      return promise;
    },
  });
  return perDecode;
}

describe("the tuned build's draws", () => {
  /** A context created with `env` set (the addon reads it then); the draws and tokens of its streams (8 each). */
  async function draws(options: {
    env?: Record<string, string>;
    metadata?: { probabilities?: boolean };
    temperature?: number;
    streams?: number;
    tokens?: number;
  }) {
    const { llama } = await loadLlama(false, 2, TUNED);
    try {
      const weights = await llama.loadModel({ modelPath: await ensureModelFile(model, config) });
      const streams = options.streams ?? 1;
      const env = options.env ?? {};
      for (const [name, value] of Object.entries(env)) process.env[name] = value;
      const context = await weights
        .createContext({ sequences: streams, contextSize: 512, threads: 2 })
        .finally(() => {
          for (const name of Object.keys(env)) delete process.env[name];
        });
      const perDecode = watchDraws(context);
      const stream = async (i: number) => {
        const tokens: number[] = [];
        const sequence = context.getSequence();
        const prompt = weights.tokenize(PROMPTS[i % PROMPTS.length] as string);
        for await (const { token } of sequence.evaluateWithMetadata(prompt, options.metadata ?? {}, {
          temperature: options.temperature ?? 0,
          seed: 7,
        })) {
          tokens.push(token);
          if (tokens.length === (options.tokens ?? 8)) break;
        }
        return tokens;
      };
      const tokens = await Promise.all(Array.from({ length: streams }, (_, i) => stream(i)));
      await context.dispose();
      await weights.dispose();
      return { perDecode, tokens };
    } finally {
      await llama.dispose();
    }
  }

  it("draws a cheap token on the JS thread, and one that returns probabilities on libuv's pool", async () => {
    expect((await draws({})).perDecode.flat()).toEqual(Array(8).fill(true));
    // A pass over the whole vocabulary stays off the JS thread.
    expect((await draws({ metadata: { probabilities: true } })).perDecode.flat()).toEqual(
      Array(8).fill(false),
    );
    // HEARTH_ADDON_SAMPLING=pool: every draw on the pool, as node-llama-cpp does.
    const pool = await draws({ env: { HEARTH_ADDON_SAMPLING: "pool" } });
    expect(pool.perDecode.flat()).toEqual(Array(8).fill(false));
  });

  it("keeps at most two draws of a decode on the JS thread, unless they are argmax draws", async () => {
    // Temperature 1: three streams' prompts are decoded together, and of the three draws after that decode, the
    // first two are on the JS thread and the third on the pool; no decode is followed by more than two on it.
    const drawn = await draws({ temperature: 1, streams: 3 });
    expect(drawn.perDecode[0]).toEqual([true, true, false]);
    for (const after of drawn.perDecode) expect(after.filter(Boolean).length).toBeLessThanOrEqual(2);
    expect(drawn.perDecode.flat()).toHaveLength(24);
    // Temperature 0: an argmax over the logits, every one on the JS thread.
    const argmax = await draws({ streams: 3 });
    expect(argmax.perDecode.flat()).toEqual(Array(24).fill(true));
    // HEARTH_ADDON_ARGMAX=0: greedy draws through the sampler chain, which are capped as any other.
    const chain = await draws({ streams: 3, env: { HEARTH_ADDON_ARGMAX: "0" } });
    expect(chain.perDecode[0]).toEqual([true, true, false]);
  });

  it("picks by argmax the tokens the sampler chain's greedy draw picks", async () => {
    const run = (env: Record<string, string>) => draws({ env, streams: 3, tokens: 48 });
    const argmax = await run({});
    const chain = await run({ HEARTH_ADDON_ARGMAX: "0" });
    expect(argmax.tokens.map((t) => t.length)).toEqual([48, 48, 48]);
    expect(argmax.tokens).toEqual(chain.tokens);
    // Greedy through the chain with probabilities returned (node-llama-cpp's own full draw) agrees too.
    const full = await draws({ metadata: { probabilities: true }, tokens: 48 });
    expect(full.tokens[0]).toEqual(argmax.tokens[0]);
  });
});

describe("the build's self-check", () => {
  it("passes on the real build and model: prompts in four sequences in one batch, then decodes together", async () => {
    const plan = planEngineBuild();
    const record = await findEngineBuild(plan);
    if (record === undefined) throw new Error("no tuned build");
    // Where the builder's check finds it in its work copy, the service finds it in the installed package.
    await linkEngineBuild(record, plan);
    const logFile = join(mkdtempSync(join(tmpdir(), "hearth-check-")), "check.log");
    await selfCheck({
      packageDir: nodeLlamaCppDir(),
      plan,
      modelPath: await ensureModelFile(model, config),
      env: process.env,
      logFile,
    });
    expect(readFileSync(logFile, "utf8")).toContain("self-check passed");
  });
});

describe("the cached build's log", () => {
  it("shows every patch applied before anything was compiled: the addon's, then llama.cpp's on the clone", () => {
    const lines = readFileSync(engineBuildLogPath(planEngineBuild()), "utf8").split("\n");
    const at = (line: string) => lines.indexOf(line);
    const firstCompile = lines.findIndex((line) => /^\[\d+\/\d+\]/.test(line));
    expect(at("patching file addon/AddonContext.cpp")).toBeGreaterThan(0);
    expect(at("patching file ggml/src/ggml-cpu/amx/mmq.cpp")).toBeGreaterThan(
      at("patching file addon/AddonContext.cpp"),
    );
    expect(at("patching file src/llama-kv-cache.cpp")).toBeGreaterThan(
      at("patching file ggml/src/ggml-cpu/amx/mmq.cpp"),
    );
    expect(firstCompile).toBeGreaterThan(at("patching file src/llama-kv-cache.cpp"));
  });
});

describe("the llama.cpp patch, compiled", () => {
  const tree = mkdtempSync(join(tmpdir(), "hearth-amx-"));
  afterAll(() => rmSync(tree, { recursive: true, force: true }));

  it("makes the AMX kernels load their tile configuration from constant data, not a half-filled stack buffer", () => {
    // The bundled source with the patch, compiled as the tuned build compiles it on a CPU with AMX (whatever CPU
    // runs the test: only the code is checked). Unpatched, GCC keeps only the buffer's zeroing and its palette byte,
    // and `ldtilecfg` reads the stack (`ldtilecfg 0xc0(%rsp)`, GCC 12): the tiles stay unconfigured and the first
    // tile instruction traps.
    checkoutBundledLlamaCpp(tree, ["ggml"]);
    const patched = spawnSync(
      "patch",
      ["-p1", "--forward", "--batch", "-i", LLAMA_CPP_PATCHES.amxTileConfig],
      {
        cwd: tree,
      },
    );
    expect(patched.status).toBe(0);
    const compiled = spawnSync(
      "g++",
      [
        ...["-std=c++17", "-O3", "-DNDEBUG", "-march=sapphirerapids", "-S", "-o", "-"],
        ...["-Iggml/include", "-Iggml/src", "-Iggml/src/ggml-cpu", "ggml/src/ggml-cpu/amx/mmq.cpp"],
      ],
      { cwd: tree, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 },
    );
    expect(compiled.status, compiled.stderr).toBe(0);
    const loads = compiled.stdout.split("\n").filter((line) => /\bldtilecfg\b/.test(line));
    expect(loads.length).toBeGreaterThan(0);
    for (const line of loads) expect(line).toMatch(/ldtilecfg\s+\S*ggml_amx_tile_config\S*\(%rip\)/);
  });
});

describe("the Q4_1 row pairs, in the tuned build", () => {
  const tree = mkdtempSync(join(tmpdir(), "hearth-q4-1-"));
  afterAll(() => rmSync(tree, { recursive: true, force: true }));

  it("multiply Q4_1 weights by a batch of any size exactly as by each of its columns alone", async () => {
    // test/model/native/q4-1-mul-mat.c, linked against the tuned build's own ggml: batches of 1 to 33 columns (pairs,
    // lone columns, more than a 16-column block), an odd row count, 1 and 2 threads. Every batched value must equal
    // its column's value multiplied alone bit for bit (the patch's kernel sums in the one-row kernel's order), and
    // the product of the dequantized weights in double precision within the activations' 8-bit rounding.
    const record = await findEngineBuild(planEngineBuild());
    const lib = join(planEngineBuild().dir, record?.folder ?? "missing", "Release");
    checkoutBundledLlamaCpp(tree, ["ggml/include"]);
    const binary = join(tree, "q4-1-mul-mat");
    const compiled = spawnSync(
      "gcc",
      [
        ...["-O2", "-std=c11", "-Iggml/include", join(import.meta.dirname, "native", "q4-1-mul-mat.c")],
        ...["-o", binary, `-L${lib}`, "-lggml-base", "-lggml-cpu", `-Wl,-rpath,${lib}`, "-lm"],
      ],
      { cwd: tree, encoding: "utf8" },
    );
    expect(compiled.status, compiled.stderr).toBe(0);
    const ran = spawnSync(binary, [], { encoding: "utf8" });
    expect(ran.status, ran.stdout + ran.stderr).toBe(0);
    const lines = ran.stdout.trim().split("\n");
    // The patched traits: two rows per call wherever the build has AVX2 (every x86 CPU this runs on).
    const avx2 = /\bavx2\b/.test(readFileSync("/proc/cpuinfo", "utf8"));
    expect(lines[0]).toBe(avx2 ? "nrows 2" : "nrows 1");
    expect(lines.slice(1)).toHaveLength(16);
    for (const line of lines.slice(1)) expect(line).toMatch(/differing 0, /);
  });
});

describe("an engine on the tuned build", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = new LlamaEngine({
      models: [model],
      engine: TUNED,
      resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
    });
    await engine.start();
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  it("says which build serves, and generates", async () => {
    expect(engine.health()[0]).toMatchObject({ ready: true, engineBuild: "tuned" });
    expect((await engine.accelerator())?.build).toEqual({ build: "tuned", key: planEngineBuild().key });
    expect(await generatedText(engine, model.id)).not.toBe("");
  });

  it("generates for both sequences at once (their prompts and tokens in shared batches)", async () => {
    const texts = await Promise.all([generatedText(engine, model.id), generatedText(engine, model.id)]);
    for (const text of texts) expect(text).not.toBe("");
  });
});
