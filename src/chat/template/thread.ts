// Large chat-template renders run on a worker thread, so no conversation holds the event loop while it renders.

import { Worker } from "node:worker_threads";
import type { ChatMessage } from "../../engine/types.js";
import { Refusal } from "../../refusal.js";
import type { PromptRenderer, PromptRendererOptions, RenderedPrompt, RenderOptions } from "./render.js";
import { TemplateError } from "./render.js";
import type { RenderJob, RenderReply } from "./worker.js";

/**
 * Conversations up to this many messages (tools count as messages) render on the calling thread: the Jinja
 * interpreter takes ~33 µs per message on the reference machine, so at most ~10 ms even with a checking second
 * render, less than a hop to the thread and back costs in latency for small prompts. Larger ones go to the thread
 * (2,048 messages: ~70 ms).
 */
export const RENDER_INLINE_MAX = 256;

/** Renders waiting for the thread at once; beyond it a request is refused (retryable) instead of queueing. */
export const RENDER_THREAD_MAX_PENDING = 64;

export class RenderQueueFullError extends Refusal {
  override name = "RenderQueueFullError";
  readonly fault = "server";
  constructor(readonly pending: number) {
    super(`The server is overloaded: ${pending} large prompts are waiting to be rendered.`);
  }
}

export interface AsyncPromptRenderer {
  renderDetailed(messages: readonly ChatMessage[], options: RenderOptions): Promise<RenderedPrompt>;
}

/**
 * One worker thread, started on the first large render and shared by every model's renderer (each job carries
 * its template's options; the thread keeps a renderer per template). A thread that dies fails its pending
 * renders and is started again by the next one.
 */
export class TemplateThread {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (rendered: RenderedPrompt) => void; reject: (err: Error) => void }
  >();

  constructor(private readonly maxPending = RENDER_THREAD_MAX_PENDING) {}

  /** `local` renders small conversations at once; larger ones are sent with `options` to the thread. */
  renderer(local: PromptRenderer, options: PromptRendererOptions): AsyncPromptRenderer {
    return {
      renderDetailed: async (messages, renderOptions) => {
        if (messages.length + (renderOptions.tools?.length ?? 0) <= RENDER_INLINE_MAX) {
          return local.renderDetailed(messages, renderOptions);
        }
        return this.render(options, messages, renderOptions);
      },
    };
  }

  render(
    template: PromptRendererOptions,
    messages: readonly ChatMessage[],
    options: RenderOptions,
  ): Promise<RenderedPrompt> {
    if (this.pending.size >= this.maxPending)
      return Promise.reject(new RenderQueueFullError(this.pending.size));
    const id = this.nextId++;
    // Compiled schemas (classes, caches) stay here: the template reads only a tool's name, description, parameters.
    const tools = options.tools?.map(({ compiledParameters: _, ...tool }) => tool);
    const job = {
      id,
      template,
      messages: [...messages],
      options: { ...options, ...(tools === undefined ? {} : { tools }) },
    } as RenderJob;
    return new Promise<RenderedPrompt>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const worker = this.started();
      worker.ref();
      worker.postMessage(job);
    });
  }

  async dispose(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
    this.failPending(new Error("the template thread was stopped"));
  }

  private started(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = import.meta.url.endsWith(".ts")
      ? // Under the TypeScript sources (tests, the bench) the worker is a .ts file: it registers tsx first
        // (`--import tsx` in a worker's execArgv is not applied under vitest).
        new Worker(
          `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((tsx) => { tsx.register(); ` +
            `return import(${JSON.stringify(new URL("./worker.ts", import.meta.url).href)}); })`,
          { eval: true },
        )
      : new Worker(new URL("./worker.js", import.meta.url));
    worker.on("message", (reply: RenderReply) => {
      const waiting = this.pending.get(reply.id);
      if (waiting === undefined) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) worker.unref();
      if ("rendered" in reply) waiting.resolve(reply.rendered);
      else if (reply.error.templateKind !== undefined)
        waiting.reject(new TemplateError(reply.error.templateKind, reply.error.message));
      else waiting.reject(new Error(reply.error.message));
    });
    const gone = (err: Error) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.failPending(err);
    };
    worker.on("error", gone);
    worker.on("exit", (code) => gone(new Error(`the template thread exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }

  private failPending(err: Error): void {
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const { reject } of waiting) reject(err);
  }
}
