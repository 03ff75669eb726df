// The model catalogue: hearth.yaml's embedded models are the seed, models added or removed at run time are stored
// (model_catalogue) and every change reaches the other replicas through the cache-invalidation broadcast. Every
// change is in the audit log, made by "admin" (the admin API, the CLI and the operator view all hold the admin token).

import { eq } from "drizzle-orm";
import type { ModelConfig } from "../config/schema.js";
import { modelConfigSchema } from "../config/schema.js";
import { ModelCatalogueError } from "../engine/errors.js";
import type { ModelHealth } from "../engine/types.js";
import type { Logger } from "../observability/logger.js";
import { Refusal } from "../refusal.js";
import type { StoreDb } from "../store/open-store.js";
import { modelCatalogue } from "../store/schema.js";
import { ADMIN_ACTOR, writeAudit } from "../tenancy/audit.js";
import type { CacheInvalidation, CacheInvalidations } from "../tenancy/invalidation.js";
import { parseModelSource } from "./source.js";

/** What the catalogue drives: the embedded engine (LlamaEngine). */
export interface ModelHost {
  addModel(config: ModelConfig): void;
  removeModel(id: string): Promise<void>;
  loadModel(id: string): Promise<void>;
  unloadModel(id: string, reason?: string): Promise<void>;
  modelConfig(id: string): ModelConfig | undefined;
  health(): ModelHealth[];
}

export type ModelAction = "load" | "unload";

/** Whether `engine` can change its models at run time (the embedded engine). */
export function isModelHost(engine: object): engine is ModelHost {
  return "addModel" in engine && "removeModel" in engine && "modelConfig" in engine;
}

/** A model entry given at run time failed the same checks as one in hearth.yaml. */
export class ModelEntryError extends Refusal {
  override name = "ModelEntryError";
  readonly fault = "client";
  constructor(
    message: string,
    /** The entry's field at fault ("contextSize"), when one is. */
    readonly param: string | undefined,
  ) {
    super(message);
  }
}

export interface ModelCatalogueOptions {
  host: ModelHost;
  /** hearth.yaml's embedded models. */
  seed: readonly ModelConfig[];
  /** Every model id served now, upstream ones too (a new id must be none of them). */
  servedIds: () => readonly string[];
  /** The replica's fan-out: a change is applied here and carried to the other replicas. */
  invalidation: CacheInvalidations;
  logger: Logger;
}

/** One model as the admin API lists it. */
export interface CatalogueEntry {
  config: ModelConfig;
  /** From hearth.yaml (else added at run time). */
  seeded: boolean;
  health: ModelHealth | undefined;
}

export class ModelCatalogue {
  private readonly seed: ReadonlyMap<string, ModelConfig>;

  constructor(
    private readonly db: StoreDb,
    private readonly options: ModelCatalogueOptions,
  ) {
    this.seed = new Map(options.seed.map((m) => [m.id, m]));
    options.invalidation.addCache((event) => {
      this.apply(event).catch((err: unknown) =>
        options.logger.error({ err, event }, "applying a model catalogue change failed"),
      );
    });
  }

  /** Makes the engine's models those of the seed and the stored changes (at start, and after a lost broadcast). */
  async sync(): Promise<void> {
    const rows = await this.db.select().from(modelCatalogue);
    const wanted = new Map(this.seed);
    for (const row of rows) {
      if (row.config === null) {
        wanted.delete(row.id);
        continue;
      }
      const parsed = parseEntry(row.config);
      if (parsed.ok) wanted.set(row.id, parsed.config.model);
      else
        this.options.logger.error({ model: row.id, reason: parsed.error.message }, "stored model is invalid");
    }
    for (const [id, config] of wanted) await this.reconcile(id, config);
    for (const h of this.options.host.health()) {
      if (!wanted.has(h.model)) await this.reconcile(h.model, undefined);
    }
  }

  /**
   * Adds a model (hearth.yaml's entry shape and checks), stores it and starts loading it in the background, here
   * and on every replica. Throws ModelEntryError for a bad entry, ModelCatalogueError when the id is taken.
   */
  async add(entry: unknown): Promise<ModelConfig> {
    const parsed = parseEntry(entry);
    if (!parsed.ok) throw parsed.error;
    const { model, input } = parsed.config;
    if (this.options.servedIds().includes(model.id)) throw new ModelCatalogueError(model.id, "exists");
    await this.write(model.id, input);
    this.changed(model.id, "changed");
    await this.reconcile(model.id, model);
    return model;
  }

  /** Unloads the model (after its running requests) and removes it, here and on every replica, for good. */
  async remove(id: string): Promise<void> {
    this.assertEmbedded(id);
    await this.write(id, null);
    this.changed(id, "changed");
    await this.reconcile(id, undefined);
  }

  /** Loads (or unloads) the model on every replica; here, resolves when it is done (load: in the background). */
  async act(id: string, action: ModelAction): Promise<void> {
    this.assertEmbedded(id);
    const at = new Date();
    await this.db.transaction((tx) =>
      writeAudit(tx, { actor: ADMIN_ACTOR, action: `model.${action}`, orgId: null, target: id, at }),
    );
    this.changed(id, action);
    await this.apply({ kind: "model", modelId: id, action });
  }

  /** Every embedded model with its config and state, seed first. */
  list(): CatalogueEntry[] {
    return this.options.host.health().flatMap((health) => {
      const config = this.options.host.modelConfig(health.model);
      return config === undefined ? [] : [{ config, seeded: this.seed.has(health.model), health }];
    });
  }

  private assertEmbedded(id: string): void {
    if (this.options.host.modelConfig(id) === undefined) throw new ModelCatalogueError(id, "not_found");
  }

  private changed(modelId: string, action: "changed" | ModelAction): void {
    this.options.invalidation.changed({ kind: "model", modelId, action });
  }

  /** A change made here or on another replica. */
  private async apply(event: CacheInvalidation): Promise<void> {
    if (event.kind === "all") return this.sync();
    if (event.kind !== "model") return;
    const { modelId, action } = event;
    if (action === "changed") return this.reconcileFromStore(modelId);
    if (this.options.host.modelConfig(modelId) === undefined) return;
    // A load that fails (budget, file) is in the model's state; the replica that asked reports it from there.
    if (action === "load") this.options.host.loadModel(modelId).catch(() => undefined);
    else await this.options.host.unloadModel(modelId, "unloaded by an operator");
  }

  private async reconcileFromStore(id: string): Promise<void> {
    const [row] = await this.db.select().from(modelCatalogue).where(eq(modelCatalogue.id, id));
    if (row === undefined) return this.reconcile(id, this.seed.get(id));
    if (row.config === null) return this.reconcile(id, undefined);
    const parsed = parseEntry(row.config);
    return this.reconcile(id, parsed.ok ? parsed.config.model : undefined);
  }

  /** Makes the engine serve `config` under `id` (a new model starts loading), or nothing when undefined. */
  private async reconcile(id: string, config: ModelConfig | undefined): Promise<void> {
    const host = this.options.host;
    const current = host.modelConfig(id);
    if (current !== undefined && config !== undefined && sameConfig(current, config)) return;
    if (current !== undefined) await host.removeModel(id);
    if (config === undefined) return;
    host.addModel(config);
    host.loadModel(id).catch(() => undefined);
  }

  /** Stores the change and its audit record together. */
  private async write(id: string, config: Record<string, unknown> | null): Promise<void> {
    const at = new Date();
    await this.db.transaction(async (tx) => {
      await tx
        .insert(modelCatalogue)
        .values({ id, config, updatedAt: at })
        .onConflictDoUpdate({ target: modelCatalogue.id, set: { config, updatedAt: at } });
      await writeAudit(tx, {
        actor: ADMIN_ACTOR,
        action: config === null ? "model.remove" : "model.add",
        orgId: null,
        target: id,
        ...(config === null ? {} : { details: config }),
        at,
      });
    });
  }
}

function sameConfig(a: ModelConfig, b: ModelConfig): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

type ParsedEntry =
  | { ok: true; config: { model: ModelConfig; input: Record<string, unknown> } }
  | { ok: false; error: ModelEntryError };

/** hearth.yaml's checks for an embedded model entry: the zod schema, then the source's syntax. */
function parseEntry(entry: unknown): ParsedEntry {
  if (typeof entry === "object" && entry !== null && "upstream" in entry) {
    return {
      ok: false,
      error: new ModelEntryError(
        "Only embedded models (with a `source`) can be added at run time; upstream models are configured in hearth.yaml.",
        "upstream",
      ),
    };
  }
  const result = modelConfigSchema.safeParse(entry);
  if (!result.success) {
    const issue = result.error.issues[0];
    const param = issue?.path.map(String).join(".") || undefined;
    const message = `${param === undefined ? "" : `${param}: `}${issue?.message ?? "invalid model"}`;
    return { ok: false, error: new ModelEntryError(message, param) };
  }
  try {
    parseModelSource(result.data.source);
  } catch (err) {
    return { ok: false, error: new ModelEntryError((err as Error).message, "source") };
  }
  return { ok: true, config: { model: result.data, input: entry as Record<string, unknown> } };
}
