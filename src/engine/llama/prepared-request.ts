// Before the queue: a request rendered, tokenized, checked against the context and given its output control.
import type { LlamaModel, Token } from "node-llama-cpp";
import { type GenerationPlan, planGeneration, planPrompt } from "../../chat/output/plan.js";
import type { PromptSegment } from "../../chat/template/render.js";
import type { AsyncPromptRenderer } from "../../chat/template/thread.js";
import type { TemplateCapabilities } from "../../chat/template/tool-format.js";
import {
  ContextOverflowError,
  PromptTooLongError,
  RequestAbortedError,
  TooManyChoicesError,
  UnknownTokenError,
} from "../errors.js";
import type { GenerationRequest, PreparedRequest } from "../types.js";
import type { OutputControl, PreparedOutput } from "./output-control.js";

/** A request rendered and tokenized by this model's runner, with its compiled output control. */
export class LlamaPreparedRequest implements PreparedRequest {
  constructor(
    readonly request: GenerationRequest,
    readonly prompt: Token[],
    readonly maxTokensPerChoice: number,
    readonly output: PreparedOutput | undefined,
  ) {}

  get promptTokens(): number {
    return this.prompt.length;
  }
}

export interface RequestPreparerOptions {
  model: LlamaModel;
  contextSize: number;
  /**
   * Characters of rendered prompt per token of context that are read at most: a longer prompt is refused before it
   * is tokenized (node-llama-cpp tokenizes synchronously, holding the event loop for every request).
   */
  promptCharsPerToken: number;
  /** Sequences of the context: the most choices a request may ask for. */
  sequences: number;
  /** Large conversations render on the template thread (src/chat/template/thread.ts), small ones at once. */
  renderer: AsyncPromptRenderer;
  /** What the model's chat template can do (tools, thinking): decides prompted vs native formats. */
  capabilities: TemplateCapabilities;
  control: OutputControl;
  /** Tokens of the model's vocabulary: `logit_bias` may name ids below it only. */
  vocabularySize: number;
}

export class RequestPreparer {
  private readonly maxPromptChars: number;

  constructor(private readonly options: RequestPreparerOptions) {
    this.maxPromptChars = Math.floor(options.contextSize * options.promptCharsPerToken);
  }

  /** Renders, tokenizes, checks the context and compiles the grammar; queues nothing. */
  async prepare(request: GenerationRequest): Promise<LlamaPreparedRequest> {
    const { sequences, contextSize } = this.options;
    if (request.n > sequences) throw new TooManyChoicesError(request.n, sequences);
    checkLogitBias(request.sampling.logitBias, this.options.vocabularySize);
    const { tokens: prompt, plan } = await this.preparePrompt(request);
    const room = contextSize - prompt.length;
    const { defaultMaxTokens } = request.sampling;
    const maxTokens =
      request.sampling.maxTokens ??
      (defaultMaxTokens === undefined ? room : Math.min(defaultMaxTokens, room));
    if (prompt.length + maxTokens > contextSize || maxTokens < 1) {
      throw new ContextOverflowError(contextSize, prompt.length, request.sampling.maxTokens);
    }
    const output = plan === undefined ? undefined : await this.options.control.prepare(plan, maxTokens);
    return new LlamaPreparedRequest(request, prompt, maxTokens, output);
  }

  /** Renders the prompt (with the output plan's instructions and tools) and tokenizes it. */
  async preparePrompt(
    request: GenerationRequest,
  ): Promise<{ tokens: Token[]; plan: GenerationPlan | undefined }> {
    const { model, renderer, capabilities } = this.options;
    const structured = request.output !== undefined || request.enableThinking;
    const promptPlan = planPrompt(request.messages, request.output, request.enableThinking, capabilities);
    const rendered = await renderer.renderDetailed(promptPlan.messages, {
      enableThinking: request.enableThinking,
      ...(request.reasoningEffort === undefined ? {} : { reasoningEffort: request.reasoningEffort }),
      ...(promptPlan.templateTools === undefined ? {} : { tools: promptPlan.templateTools }),
    });
    const segments: PromptSegment[] = [...rendered.segments];
    let plan: GenerationPlan | undefined;
    // Templates that always open <think> need the plan even for plain requests (to close it when reasoning is off).
    if (structured || capabilities.nativeThinking) {
      plan = planGeneration(promptPlan, rendered.text, request.output, capabilities);
      if (plan.promptSuffix !== "") segments.push({ text: plan.promptSuffix, special: true });
    }
    // Checked on the rendered text (templates may drop client text, e.g. earlier reasoning); the API's own bound
    // on the messages' characters keeps the render itself small.
    this.checkPromptChars(segments.reduce((chars, segment) => chars + segment.text.length, 0));
    // Tokenizing is synchronous (and a small render too): other requests get the event loop between the two.
    await new Promise<void>((resolve) => setImmediate(resolve));
    // A client that left meanwhile costs no tokenizing.
    if (request.signal?.aborted === true) throw new RequestAbortedError(request.model);
    const tokens: Token[] = [];
    for (const segment of segments) {
      for (const t of model.tokenize(segment.text, segment.special)) tokens.push(t);
    }
    return { tokens: withBos(model, tokens), plan };
  }

  private checkPromptChars(chars: number): void {
    if (chars > this.maxPromptChars) {
      throw new PromptTooLongError(this.options.contextSize, chars, this.maxPromptChars);
    }
  }
}

/**
 * The prompt with the BOS token first when the vocabulary asks for one (GGUF `tokenizer.ggml.add_bos_token`, e.g.
 * Gemma) and the template did not write it, as llama.cpp tokenizes a prompt; never a second one.
 */
export function withBos(model: Pick<LlamaModel, "tokens">, tokens: Token[]): Token[] {
  const bos = model.tokens.bos;
  if (!model.tokens.shouldPrependBosToken || bos === null || tokens[0] === bos) return tokens;
  return [bos, ...tokens];
}

/** Every biased token must be in the vocabulary (the API checked the ids' form and the values' range). */
function checkLogitBias(bias: ReadonlyMap<number, number> | undefined, vocabularySize: number): void {
  for (const token of bias?.keys() ?? []) {
    if (token >= vocabularySize) throw new UnknownTokenError(token, vocabularySize);
  }
}
