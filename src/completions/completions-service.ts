// The completions service: one chat completion from a validated request to an admitted, metered generation, in
// the order every refusal must come (all before the 200). No HTTP here.
import { randomInt } from "node:crypto";
import { RequestAbortedError } from "../engine/errors.js";
import type { Engine, Generation, GenerationRequest } from "../engine/types.js";
import type { RateLimiter } from "../limits/types.js";
import type { Accounting } from "./accounting.js";
import type { ModelAccess } from "./model-access.js";
import type { Completion, CompletionCaller, CompletionRequest } from "./types.js";

export interface CompletionsDeps {
  engine: Engine;
  access: ModelAccess;
  limiter: RateLimiter;
  accounting: Accounting;
}

export class CompletionsService {
  constructor(private readonly deps: CompletionsDeps) {}

  /**
   * Admits one chat completion or throws the reason it was refused, nothing generated: unknown or ungranted
   * model (404) or models loading (503); the prompt does not fit (400); rate limit (429); queue full or timed
   * out (503); the client left while queued (499).
   */
  async start(request: CompletionRequest, caller: CompletionCaller): Promise<Completion> {
    const { engine, access, limiter, accounting } = this.deps;
    const { principal, signal } = caller;
    await access.assertCallable(principal, request.model);

    const prepared = await engine.prepare(toGenerationRequest(request, principal.orgId, signal));
    if (signal.aborted) throw new RequestAbortedError(request.model);

    // Every choice may use its whole budget. Without max_tokens the budget is the rest of the context: an upper
    // bound, which the limiter may lower to the TPM limit (but never below the prompt).
    const tokens = prepared.promptTokens + prepared.maxTokensPerChoice * request.n;
    const bound = request.sampling.maxTokens === undefined ? { minTokens: prepared.promptTokens } : {};
    const admission = await limiter.admit(principal, tokens, bound);

    let generation: Generation;
    try {
      generation = await engine.enqueue(prepared);
    } catch (err) {
      // Refused after the charge (overloaded, timed out, client left): the charge is given back.
      await admission.refund();
      throw err;
    }
    const metered = accounting.meter(generation, {
      principal,
      model: request.model,
      requestId: caller.requestId,
      startedAt: caller.startedAt,
      admission,
      signal,
    });
    return { generation: metered, rateLimit: admission.snapshot };
  }
}

function toGenerationRequest(
  request: CompletionRequest,
  orgId: string,
  signal: AbortSignal,
): GenerationRequest {
  return {
    model: request.model,
    messages: request.messages,
    enableThinking: request.enableThinking,
    n: request.n,
    sampling: { ...request.sampling, seed: request.sampling.seed ?? randomInt(2 ** 31) },
    // The organization scopes the prefix cache (never shared across organizations) and is the fairness key.
    cacheScope: orgId,
    ...(request.cacheSalt === undefined ? {} : { cacheSalt: request.cacheSalt }),
    signal,
    ...(request.output === undefined ? {} : { output: request.output }),
  };
}
