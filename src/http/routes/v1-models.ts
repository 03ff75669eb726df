// GET /v1/models and /v1/models/:id, limited to what the key's organization may call.
import type { Context } from "hono";
import type { ModelAccess } from "../../completions/model-access.js";
import type { ModelInfo } from "../../engine/types.js";
import type { AppEnv } from "../env.js";
import type { Model, ModelList } from "../openai/wire.js";

function toModelObject(model: ModelInfo): Model {
  return {
    id: model.id,
    object: "model",
    created: model.created,
    owned_by: "hearth",
    context_length: model.contextSize,
  };
}

export async function listModels(c: Context<AppEnv>, access: ModelAccess): Promise<Response> {
  const models = await access.accessibleModels(c.get("principal"));
  const list: ModelList = { object: "list", data: models.map(toModelObject) };
  return c.json(list);
}

export async function retrieveModel(c: Context<AppEnv>, access: ModelAccess): Promise<Response> {
  const model = await access.find(c.get("principal"), c.req.param("id") ?? "");
  return c.json(toModelObject(model));
}
