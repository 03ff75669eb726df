// The template thread's side (see thread.ts): renders the conversations it is sent with the renderer
// of their template, and answers with the rendered prompt or the error, by request id.
import { parentPort } from "node:worker_threads";
import type { ChatMessage } from "../../engine/types.js";
import {
  createPromptRenderer,
  type PromptRenderer,
  type PromptRendererOptions,
  type RenderedPrompt,
  type RenderOptions,
  TemplateError,
} from "./render.js";

/** What the main thread sends: the template's options travel with every render (a few KiB beside the messages). */
export interface RenderJob {
  id: number;
  template: PromptRendererOptions;
  messages: ChatMessage[];
  options: RenderOptions;
}

export type RenderReply =
  | { id: number; rendered: RenderedPrompt }
  | { id: number; error: { message: string; templateKind?: TemplateError["kind"] } };

// Renderers by their options: parsing a template and analysing it is done once per template, as on the main side.
const renderers = new Map<string, PromptRenderer>();

function rendererFor(options: PromptRendererOptions): PromptRenderer {
  const key = JSON.stringify(options);
  let renderer = renderers.get(key);
  if (renderer === undefined) {
    renderer = createPromptRenderer(options);
    renderers.set(key, renderer);
  }
  return renderer;
}

parentPort?.on("message", (job: RenderJob) => {
  let reply: RenderReply;
  try {
    reply = { id: job.id, rendered: rendererFor(job.template).renderDetailed(job.messages, job.options) };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    reply = {
      id: job.id,
      error: err instanceof TemplateError ? { message, templateKind: err.kind } : { message },
    };
  }
  parentPort?.postMessage(reply);
});
