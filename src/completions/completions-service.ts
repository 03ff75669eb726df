// The completions service: one chat completion from a validated request to an admitted, metered generation, in
// the order every refusal must come (all before the 200). No HTTP here.
import { randomInt } from "node:crypto";
import { RequestAbortedError } from "../engine/errors.js";
import type { Engine, Generation, GenerationRequest, ModelInfo, PromptCount } from "../engine/types.js";
import { limitsTokens } from "../limits/org-rate-limiter.js";
import type { RateLimiter, RequestCharge } from "../limits/types.js";
import { isClientsDoing } from "../refusal.js";
import type { Accounting } from "./accounting.js";
import type { ModelAccess } from "./model-access.js";
import { withModelDefaults } from "./model-defaults.js";
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
   * Admits one chat completion or throws the reason it was refused, nothing generated, in this order:
   * requests per minute (429) before any work on the request; then `read` (the request's validation: 400);
   * unknown or ungranted model (404) or models loading (503); the prompt does not fit (400); tokens per minute
   * (429); queue full or timed out (503); the client left while queued (499).
   *
   * Every refusal after the first keeps the request counted when it was the client's doing (its `fault` says so:
   * bad input, its limits, it left), as OpenAI counts unsuccessful requests; the server's (overloaded, loading) and
   * anything that is not a refusal (a bug) give it back.
   */
  async start<R extends CompletionRequest>(
    read: () => R | Promise<R>,
    caller: CompletionCaller,
  ): Promise<Completion & { request: R }> {
    // Counted as on its way to the engine's queue since it was received (`caller.arrived`): the engine's steps may
    // wait for it to start it with the requests sent together. It has arrived once queued or refused.
    const arrived = caller.arrived ?? (() => {});
    try {
      return await this.counted(caller, async (charge) => {
        const request = await read();
        return { ...(await this.admit(request, caller, charge, arrived)), request };
      });
    } finally {
      arrived();
    }
  }

  /**
   * The tokenize route: `request`'s prompt tokens as its model counts them. It counts as a request (RPM, first, as a
   * chat completion: rendering and tokenizing cost the same), then the model must be the caller's; no tokens are
   * charged. The same refusals as `start` up to the count.
   */
  async countPromptTokens<R extends CompletionRequest>(
    read: () => R | Promise<R>,
    caller: CompletionCaller,
  ): Promise<{ count: PromptCount; request: R }> {
    return this.counted(caller, async () => {
      const request = await read();
      const model = await this.deps.access.assertCallable(caller.principal, request.model);
      const count = await this.deps.engine.countPromptTokens(
        toGenerationRequest(request, model, caller.principal.orgId, caller.signal),
      );
      return { count, request };
    });
  }

  /**
   * Counts the request (RPM) before any work on it, then runs `work`; a refusal that is not the client's doing
   * (the server's, or a bug) gives the request back. Counted before parsing, rendering, tokenizing or building a grammar: a key at
   * its RPM gets its 429 for the price of one window update, however expensive the request it sent.
   */
  private async counted<T>(
    caller: CompletionCaller,
    work: (charge: RequestCharge) => Promise<T>,
  ): Promise<T> {
    const charge = await this.deps.limiter.chargeRequest(caller.principal);
    try {
      return await work(charge);
    } catch (err) {
      if (!isClientsDoing(err)) await charge.refund();
      throw err;
    }
  }

  private async admit(
    request: CompletionRequest,
    caller: CompletionCaller,
    charge: RequestCharge,
    arrived: () => void,
  ): Promise<Completion> {
    const { engine, access, limiter, accounting } = this.deps;
    const { principal, signal } = caller;
    const model = await access.assertCallable(principal, request.model);

    const prepared = await engine.prepare({
      ...toGenerationRequest(request, model, principal.orgId, signal),
      // For the engine's log lines only (an upstream fault's warn line names the request).
      requestId: caller.requestId,
      // Only a TPM pre-charge needs the exact count first (an upstream engine asks its endpoint for it).
      exactPromptCount: limitsTokens(principal),
    });
    if (signal.aborted) throw new RequestAbortedError(request.model);

    // Every choice may use its whole budget. Without max_tokens the budget is the rest of the context: an upper
    // bound, which the limiter may lower to the TPM limit (but never below the prompt).
    const tokens = prepared.promptTokens + prepared.maxTokensPerChoice * request.n;
    const bound =
      prepared.request.sampling.maxTokens === undefined ? { minTokens: prepared.promptTokens } : {};
    const admission = await limiter.admitTokens(charge, tokens, bound);

    let generation: Generation;
    try {
      arrived();
      generation = await engine.enqueue(prepared);
    } catch (err) {
      // Refused after the charge, nothing generated: the tokens go back; the request too unless the client left.
      if (isClientsDoing(err)) await admission.settle(0);
      else await admission.refund();
      throw err;
    }
    const metered = accounting.meter(generation, {
      principal,
      model: request.model,
      requestId: caller.requestId,
      startedAt: caller.startedAt,
      admission,
      signal,
      user: request.user,
      endpoint: caller.endpoint,
    });
    return { generation: metered, rateLimit: admission.snapshot };
  }
}

/** The engine's request: the model's sampling defaults fill what the request left out (here, once the model is known). */
function toGenerationRequest(
  request: CompletionRequest,
  model: ModelInfo,
  orgId: string,
  signal: AbortSignal,
): GenerationRequest {
  const sampling = withModelDefaults(request.sampling, model.defaults);
  return {
    model: request.model,
    messages: request.messages,
    enableThinking: request.enableThinking,
    n: request.n,
    sampling: { ...sampling, seed: sampling.seed ?? randomInt(2 ** 31) },
    // The organization scopes the prefix cache (never shared across organizations) and is the fairness key.
    cacheScope: orgId,
    ...(request.cacheSalt === undefined ? {} : { cacheSalt: request.cacheSalt }),
    ...(request.promptCacheKey === undefined ? {} : { promptCacheKey: request.promptCacheKey }),
    ...(request.sessionId === undefined ? {} : { sessionId: request.sessionId }),
    ...(request.reasoningEffort === undefined ? {} : { reasoningEffort: request.reasoningEffort }),
    ...(request.user === undefined ? {} : { user: request.user }),
    signal,
    ...(request.output === undefined ? {} : { output: request.output }),
  };
}
