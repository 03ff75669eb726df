// The one model-access check every /v1 route uses: configured AND granted to the caller's organization.
import type { Services } from "../app/services.js";
import type { Principal } from "../auth/principal.js";
import type { ModelInfo } from "../engine/types.js";
import { ModelNotFoundError, NotReadyError } from "../errors/api-error.js";

/** Models the principal may call, in config order. */
export async function accessibleModels(services: Services, principal: Principal): Promise<ModelInfo[]> {
  const granted = await services.tenancy.allowedModels(principal.orgId);
  return services.engine.listModels().filter((m) => granted.has(m.id));
}

/** Throws the same 404 whether the model does not exist or is not granted: no existence oracle. */
export async function assertModelAccess(
  services: Services,
  principal: Principal,
  model: string,
): Promise<void> {
  const models = await accessibleModels(services, principal);
  if (!models.some((m) => m.id === model)) throw new ModelNotFoundError(model);
  if (!services.engine.isReady()) throw new NotReadyError();
}
