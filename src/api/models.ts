// GET /v1/models and /v1/models/:id, limited to what the key's organization may call.
import type { Context } from "hono";
import type { AppEnv } from "../app/env.js";
import type { Services } from "../app/services.js";
import type { ModelInfo } from "../engine/types.js";
import { ModelNotFoundError } from "../errors/api-error.js";
import { accessibleModels } from "./model-access.js";

function toModelObject(model: ModelInfo) {
  return {
    id: model.id,
    object: "model" as const,
    created: model.created,
    owned_by: "hearth",
    context_length: model.contextSize,
  };
}

export async function listModels(c: Context<AppEnv>, services: Services): Promise<Response> {
  const models = await accessibleModels(services, c.get("principal"));
  return c.json({ object: "list", data: models.map(toModelObject) });
}

export async function retrieveModel(c: Context<AppEnv>, services: Services): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const model = (await accessibleModels(services, c.get("principal"))).find((m) => m.id === id);
  if (model === undefined) throw new ModelNotFoundError(id);
  return c.json(toModelObject(model));
}
