// The llama.cpp backend (CPU, CUDA, Vulkan, Metal) from node-llama-cpp's prebuilt binaries, never a build, and what
// operators see of it: the backend in use and the GPU's memory.
import { getLlama, type Llama, LlamaLogLevel } from "node-llama-cpp";
import type { GpuSetting } from "../../config/schema.js";
import type { AcceleratorState } from "../types.js";

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
 * node-llama-cpp's Llama on the configured backend, from its prebuilt binaries only (`build: "never"`: nothing is
 * compiled or downloaded at run time). `auto` takes the GPU when a prebuilt GPU binary works here, else the CPU;
 * an explicit GPU that does not work is a start-up error, never a silent fallback to the CPU.
 */
export async function loadLlama(gpu: GpuSetting, maxThreads: number): Promise<Llama> {
  try {
    return await getLlama({ gpu, build: "never", maxThreads, logLevel: LlamaLogLevel.error });
  } catch (err) {
    if (gpu === "auto" || gpu === false) throw err;
    throw new GpuUnavailableError(gpu, err);
  }
}

/** The backend in use and, on a GPU, its memory as llama.cpp reports it (bytes, all devices together). */
export async function acceleratorState(llama: Llama): Promise<AcceleratorState> {
  if (llama.gpu === false) return { gpu: false };
  const { total, used, free } = await llama.getVramState();
  return { gpu: llama.gpu, vram: { total, used, free } };
}
