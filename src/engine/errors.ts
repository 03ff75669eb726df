// Refusals of the engine, each saying whose doing it was; src/http/errors/domain-errors.ts maps them to HTTP errors.
import { Refusal } from "../refusal.js";

export class UnknownModelError extends Refusal {
  override name = "UnknownModelError";
  readonly fault = "client";
  constructor(readonly model: string) {
    super(`Unknown model ${model}`);
  }
}

/** Prompt + max_tokens do not fit in one sequence's context. */
export class ContextOverflowError extends Refusal {
  override name = "ContextOverflowError";
  readonly fault = "client";
  constructor(
    readonly contextSize: number,
    readonly promptTokens: number,
    readonly maxTokens: number | undefined,
  ) {
    super(
      maxTokens === undefined
        ? `This model's maximum context length is ${contextSize} tokens. However, your messages resulted in ${promptTokens} tokens. Please reduce the length of the messages.`
        : `This model's maximum context length is ${contextSize} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    );
  }
}

/**
 * The prompt has more characters than the model's context can plausibly hold (`contextSize` × the model's
 * `promptCharsPerToken`): refused before it is tokenized, since tokenizing holds the event loop for every request.
 */
export class PromptTooLongError extends Refusal {
  override name = "PromptTooLongError";
  readonly fault = "client";
  constructor(
    readonly contextSize: number,
    readonly chars: number,
    readonly maxChars: number,
  ) {
    super(
      `This model's maximum context length is ${contextSize} tokens, which this server reads from at most ${maxChars} characters of prompt. However, your messages resulted in ${chars} characters. Please reduce the length of the messages.`,
    );
  }
}

/** The model's bounded queue is full, or the engine is draining. */
export class QueueFullError extends Refusal {
  override name = "QueueFullError";
  readonly fault = "server";
  constructor(readonly model: string) {
    super(`The engine for model ${model} is overloaded: every sequence is busy and the queue is full.`);
  }
}

/** The request waited in the model's queue longer than its `queueTimeoutMs`; nothing was generated. */
export class QueueTimeoutError extends Refusal {
  override name = "QueueTimeoutError";
  readonly fault = "server";
  constructor(
    readonly model: string,
    readonly timeoutMs: number,
  ) {
    super(
      `The engine for model ${model} is overloaded: the request waited ${timeoutMs} ms for a free sequence.`,
    );
  }
}

/** The request's signal aborted before it left the queue (the client left); nothing was generated. */
export class RequestAbortedError extends Refusal {
  // The conventional name, so code that checks `err.name === "AbortError"` recognises it.
  override name = "AbortError";
  readonly fault = "client";
  constructor(readonly model: string) {
    super(`The request for model ${model} was aborted before it was admitted.`);
  }
}

/**
 * The request offers tools, and the engine serving its model cannot make tool calls (a llama-server whose chat
 * template has no tool support answers such a request in plain text, ignoring the tools and `tool_choice`).
 */
export class ToolsUnsupportedError extends Refusal {
  override name = "ToolsUnsupportedError";
  readonly fault = "client";
  constructor(readonly model: string) {
    super(
      `Model ${model} cannot call tools: the chat template of the engine serving it has no tool support. Send the request without 'tools' (or with tool_choice 'none'), or serve the model with a chat template that supports tool calls.`,
    );
  }
}

/** n is more than the model can generate at once: its parallel sequences, or what its upstream engine supports. */
export class TooManyChoicesError extends Refusal {
  override name = "TooManyChoicesError";
  readonly fault = "client";
  constructor(
    readonly n: number,
    readonly max: number,
    what = `this model's ${max} parallel sequences`,
  ) {
    super(`n=${n} is more than ${what}.`);
  }
}

/** The request sets one of vLLM's sampling extensions, and the engine serving its model does not take them. */
export class SamplingFieldUnsupportedError extends Refusal {
  override name = "SamplingFieldUnsupportedError";
  readonly fault = "client";
  constructor(
    readonly model: string,
    /** The request's field: top_k, min_p or repetition_penalty. */
    readonly field: string,
    readonly kind: string,
  ) {
    super(
      `The '${field}' parameter is not supported by model ${model}: its upstream engine (${kind}) does not take it. Send the request without '${field}' (vLLM, SGLang, llama-server and Hearth engines take it).`,
    );
  }
}

/** A `logit_bias` key is not a token id of the model's vocabulary (ids 0 to `vocabularySize` − 1). */
export class UnknownTokenError extends Refusal {
  override name = "UnknownTokenError";
  readonly fault = "client";
  constructor(
    readonly token: number,
    readonly vocabularySize: number,
  ) {
    super(
      `Invalid key in 'logit_bias': ${token} is not a token of this model's vocabulary (token ids are 0 to ${vocabularySize - 1}).`,
    );
  }
}

/** The model cannot serve now: still loading (embedded), or no healthy endpoint (upstream). */
export class EngineNotReadyError extends Refusal {
  override name = "EngineNotReadyError";
  readonly fault = "server";
  constructor(
    readonly model: string,
    /** Why, in words ("loading", "no healthy endpoint"). */
    readonly detail = "loading",
  ) {
    super(`Model ${model} cannot serve now: ${detail}.`);
  }
}

/** Loading the model would exceed the memory budget even with every idle model unloaded. */
export class ModelMemoryError extends Refusal {
  override name = "ModelMemoryError";
  readonly fault = "server";
  constructor(
    readonly model: string,
    readonly resource: "ram" | "vram",
    readonly needBytes: number,
    readonly budgetBytes: number,
    readonly heldBytes: number,
  ) {
    const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
    super(
      `Model ${model} needs ${mib(needBytes)} of ${resource.toUpperCase()} and does not fit in the memory budget (${mib(budgetBytes)}): ${mib(heldBytes)} are held by models that are busy or loading. Unload a model, or raise memory.${resource}.`,
    );
  }
}

/** The model is configured but not in the catalogue any more, or an id added twice. */
export class ModelCatalogueError extends Refusal {
  override name = "ModelCatalogueError";
  readonly fault = "client";
  constructor(
    readonly model: string,
    readonly reason: "exists" | "not_found",
  ) {
    super(
      reason === "exists" ? `A model with id ${model} already exists.` : `No model ${model} is configured.`,
    );
  }
}
