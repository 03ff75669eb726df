// The admin API's models: add one (hearth.yaml's entry shape and checks), load, unload, remove, and list them with
// their state, progress and memory. Loading happens in the background: clients poll the list.
import type { Hono } from "hono";
import type { ModelAction, ModelCatalogue } from "../../catalogue/catalogue.js";
import type { AppEnv } from "../env.js";
import { domainApiError } from "../errors/domain-errors.js";
import { parseJsonBody } from "../validation.js";
import { listWire, modelWire } from "./wire.js";

export function addModelRoutes(app: Hono<AppEnv>, catalogue: ModelCatalogue): void {
  const entry = (id: string) => {
    const found = catalogue.list().find((e) => e.config.id === id);
    return found === undefined ? { id, object: "model" as const, deleted: true } : modelWire(found);
  };

  app.get("/models", (c) => c.json(listWire(catalogue.list().map(modelWire))));

  app.post("/models", async (c) => {
    // The body is a hearth.yaml model entry as JSON (camelCase fields); the catalogue validates it.
    const body = parseJsonBody(await c.req.text(), { emptyBody: {} });
    const model = await domain(() => catalogue.add(body));
    return c.json(entry(model.id), 201);
  });

  // Model ids may contain "/" (e.g. "org/model"); the greedy pattern accepts them encoded or not.
  for (const action of ["load", "unload"] as const satisfies readonly ModelAction[]) {
    app.post(`/models/:id{.+}/${action}`, async (c) => {
      const id = c.req.param("id");
      await domain(() => catalogue.act(id, action));
      // A load goes on in the background (202: poll GET /models); an unload has finished.
      return c.json(entry(id), action === "load" ? 202 : 200);
    });
  }

  app.delete("/models/:id{.+}", async (c) => {
    const id = c.req.param("id");
    await domain(() => catalogue.remove(id));
    return c.json({ id, object: "model" as const, deleted: true });
  });
}

async function domain<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw domainApiError(err) ?? err;
  }
}
