// The llama.cpp backend (CPU, CUDA, Vulkan, Metal): Hearth's tuned CPU build when `hearth engine build` made it,
// else node-llama-cpp's prebuilt binaries (never a build at run time), and what operators see of it: the backend,
// the build and the GPU's memory.
import { getLlama, getLlamaGpuTypes, type Llama, LlamaLogLevel } from "node-llama-cpp";
import type { EngineSettings, GpuSetting } from "../../config/schema.js";
import type { AcceleratorState, EngineBuildState } from "../types.js";
import { type EngineBuildPlan, findEngineBuild, linkEngineBuild, planEngineBuild } from "./engine-build.js";

/** `gpu: cuda` or `gpu: vulkan` was configured, and node-llama-cpp has no working prebuilt binary for it here. */
export class GpuUnavailableError extends Error {
  override name = "GpuUnavailableError";
  constructor(
    readonly gpu: Exclude<GpuSetting, "auto" | false>,
    override readonly cause: unknown,
  ) {
    super(
      `gpu: ${gpu} is configured, but node-llama-cpp's prebuilt ${gpu === "cuda" ? "CUDA" : "Vulkan"} binary does not ` +
        `run on this machine (no usable ${gpu === "cuda" ? "NVIDIA GPU or CUDA driver" : "Vulkan device or driver"}). ` +
        "Set gpu: auto to use a GPU when there is one and the CPU otherwise, or gpu: false for the CPU. " +
        `(${cause instanceof Error ? cause.message : String(cause)})`,
    );
  }
}

/**
 * The tuned build's polling level when `engine.threadPoolPoll` is unset: llama.cpp's (and llama-server's) default.
 * Measured on 2 vCPUs (AMD EPYC), no level is better everywhere: in-process at one stream, 0 had the smaller decode
 * tail (p95 13.5 ms against 18.3), but over HTTP, interleaved beside llama-server, 50 served one stream fastest
 * (97.6 and 102.9 tok/s; 0: 93.6, then 79.4 and 88.0 in a later run; 100: 86.1 and 95.6), and 4 and 16 streams
 * were within noise.
 */
export const DEFAULT_THREAD_POOL_POLL = 50;

/** node-llama-cpp's Llama and which build it runs. */
export interface LoadedLlama {
  llama: Llama;
  build: EngineBuildState;
}

/**
 * node-llama-cpp's Llama on the configured backend; nothing is compiled or downloaded here (`build: "never"`).
 * On the CPU, with `engine.build: auto` (or `tuned`, the same), the tuned build serves when the engine cache has it
 * for this install and CPU; otherwise, or when it does not load, the prebuilt binaries do (`build.reason` says
 * why). `auto` takes the GPU when a prebuilt GPU binary works here, else the CPU; an explicit GPU that does not
 * work is a start-up error, never a silent fallback to the CPU.
 */
export async function loadLlama(
  gpu: GpuSetting,
  maxThreads: number,
  settings: EngineSettings = { build: "auto", threadPoolPoll: undefined },
): Promise<LoadedLlama> {
  const tuned = await loadTunedLlama(gpu, maxThreads, settings);
  if ("llama" in tuned) return tuned;
  try {
    const llama = await getLlama({ gpu, build: "never", maxThreads, logLevel: LlamaLogLevel.error });
    return { llama, build: { ...tuned, build: "prebuilt" } };
  } catch (err) {
    if (gpu === "auto" || gpu === false) throw err;
    throw new GpuUnavailableError(gpu, err);
  }
}

/** The tuned build's Llama, or why the prebuilt binaries serve instead. */
async function loadTunedLlama(
  gpu: GpuSetting,
  maxThreads: number,
  settings: EngineSettings,
): Promise<LoadedLlama | Omit<EngineBuildState, "build">> {
  if (settings.build === "prebuilt") return { reason: "engine.build is prebuilt" };
  if (gpu !== false && gpu !== "auto") return { reason: `gpu: ${gpu} runs on the prebuilt binaries` };
  if (gpu === "auto" && (await getLlamaGpuTypes("supported")).some((type) => type !== false))
    return { reason: "a GPU is available: the tuned build is for the CPU" };
  let plan: EngineBuildPlan;
  try {
    plan = planEngineBuild();
  } catch (err) {
    // An install without the patch file (native/) or without node-llama-cpp's package.json: no tuned build.
    return { reason: `no tuned build can be planned: ${err instanceof Error ? err.message : err}` };
  }
  const record = await findEngineBuild(plan);
  if (record === undefined)
    return {
      key: plan.key,
      missing: true,
      reason: "the tuned build is not in the engine cache (hearth engine build)",
    };
  // Read by the patched addon when each context creates its thread pool.
  process.env.HEARTH_THREADPOOL_POLL = String(settings.threadPoolPoll ?? DEFAULT_THREAD_POOL_POLL);
  try {
    await linkEngineBuild(record, plan);
    const llama = await getLlama({
      gpu: false,
      build: "never",
      cmakeOptions: { ...plan.cmakeOptions },
      maxThreads,
      logLevel: LlamaLogLevel.error,
      progressLogs: false,
    });
    if (llama.buildType === "localBuild") return { llama, build: { build: "tuned", key: plan.key } };
    await llama.dispose();
    return { key: plan.key, reason: "node-llama-cpp did not take the tuned build" };
  } catch (err) {
    return {
      key: plan.key,
      reason: `the tuned build did not load: ${err instanceof Error ? err.message : err}`,
    };
  }
}

/** The backend and build in use and, on a GPU, its memory as llama.cpp reports it (bytes, all devices together). */
export async function acceleratorState(loaded: LoadedLlama): Promise<AcceleratorState> {
  const { llama, build } = loaded;
  if (llama.gpu === false) return { gpu: false, build };
  const { total, used, free } = await llama.getVramState();
  return { gpu: llama.gpu, build, vram: { total, used, free } };
}
