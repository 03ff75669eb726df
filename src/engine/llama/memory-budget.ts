// The memory budget's one decision: which idle models to unload (least recently used first) so a model fits.
import type { MemoryEstimate } from "../types.js";

export interface BudgetHolder {
  id: string;
  memory: MemoryEstimate;
  /** No request running or queued: it may be unloaded. */
  idle: boolean;
  /** When a request last used it (ms). */
  lastUsed: number;
}

export interface BudgetLimits {
  ramBytes?: number | undefined;
  vramBytes?: number | undefined;
}

export type EvictionPlan =
  | { fits: true; evict: string[] }
  | {
      fits: false;
      /** The first resource that cannot be freed enough. */
      resource: "ram" | "vram";
      needBytes: number;
      budgetBytes: number;
      /** Held by models that are busy (or loading) and cannot be unloaded now. */
      heldBytes: number;
    };

const RESOURCES = [
  ["ram", "ramBytes"],
  ["vram", "vramBytes"],
] as const;

/**
 * The idle models to unload, least recently used first, so `need` fits beside the models that stay; or why it
 * cannot fit even with every idle model unloaded.
 */
export function planEviction(
  need: MemoryEstimate,
  holders: readonly BudgetHolder[],
  budget: BudgetLimits,
): EvictionPlan {
  const fits = (kept: readonly BudgetHolder[]) =>
    RESOURCES.every(([, field]) => {
      const limit = budget[field];
      return limit === undefined || need[field] + sum(kept, field) <= limit;
    });
  let kept = [...holders];
  const evict: string[] = [];
  const candidates = holders.filter((h) => h.idle).sort((a, b) => a.lastUsed - b.lastUsed);
  for (const candidate of candidates) {
    if (fits(kept)) break;
    kept = kept.filter((h) => h !== candidate);
    evict.push(candidate.id);
  }
  if (fits(kept)) return { fits: true, evict };
  const busy = holders.filter((h) => !h.idle);
  for (const [resource, field] of RESOURCES) {
    const limit = budget[field];
    if (limit !== undefined && need[field] + sum(busy, field) > limit) {
      return {
        fits: false,
        resource,
        needBytes: need[field],
        budgetBytes: limit,
        heldBytes: sum(busy, field),
      };
    }
  }
  throw new Error("unreachable: a plan that fits after every idle model is unloaded");
}

function sum(holders: readonly BudgetHolder[], field: "ramBytes" | "vramBytes"): number {
  return holders.reduce((total, h) => total + h.memory[field], 0);
}
