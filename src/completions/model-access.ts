// The one model-access check every /v1 route uses: configured AND granted to the caller's organization.
import type { Principal } from "../auth/principal.js";
import { EngineNotReadyError, UnknownModelError } from "../engine/errors.js";
import type { Engine, ModelInfo } from "../engine/types.js";

/** Reads an organization's granted model ids (tenancy, cached). */
export type GrantedModels = (orgId: string) => Promise<ReadonlySet<string>>;

export class ModelAccess {
  constructor(
    private readonly engine: Engine,
    private readonly grantedModels: GrantedModels,
  ) {}

  /** Models the principal may call, in config order. */
  async accessibleModels(principal: Principal): Promise<ModelInfo[]> {
    const granted = await this.grantedModels(principal.orgId);
    return this.engine.listModels().filter((m) => granted.has(m.id));
  }

  /** The model if the principal may call it; the same 404 whether it does not exist or is not granted. */
  async find(principal: Principal, model: string): Promise<ModelInfo> {
    const found = (await this.accessibleModels(principal)).find((m) => m.id === model);
    if (found === undefined) throw new UnknownModelError(model);
    return found;
  }

  /**
   * The model (with its sampling defaults) unless the principal may not call it or the engine cannot serve it now
   * (throws); a granted model that is unloaded starts loading (on demand) and the caller is told to retry.
   */
  async assertCallable(principal: Principal, model: string): Promise<ModelInfo> {
    const found = await this.find(principal, model);
    const health = this.engine.demand?.(model) ?? this.engine.health().find((h) => h.model === model);
    if (health !== undefined && !health.ready) throw new EngineNotReadyError(model, health.detail);
    return found;
  }
}
