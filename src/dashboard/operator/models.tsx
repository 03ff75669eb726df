// The operator's models page: every embedded model with its state, download or load progress and memory estimate,
// and a Load or Unload button (the admin API's /models: the change reaches every replica).
import type { Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { domainApiError } from "../../errors/domain-errors.js";
import type { CatalogueEntry, ModelAction } from "../../models/catalogue.js";
import { MessageNotice, type PageMessage } from "../layout.js";
import type { DashboardDeps } from "../session.js";
import { OperatorForm, operatorPage } from "./frame.js";
import { type OperatorAuth, type OperatorEnv, operatorAuth, operatorPath } from "./operator-session.js";

const STATE_WORDS: Readonly<Record<string, string>> = Object.freeze({
  unloaded: "Unloaded",
  downloading: "Downloading",
  loading: "Loading",
  ready: "Serving",
  unloading: "Unloading",
  failed: "Failed",
});

export function registerOperatorModels(app: Hono<OperatorEnv>, deps: DashboardDeps): void {
  app.get("/models", (c) => modelsPage(c, deps, doneMessage(c)));

  for (const action of ["load", "unload"] as const satisfies readonly ModelAction[]) {
    app.post(`/models/${action}`, async (c) => {
      const model = String((await c.req.parseBody()).model ?? "");
      const catalogue = deps.catalogue;
      if (catalogue === undefined) return modelsPage(c, deps, undefined, 404);
      try {
        await catalogue.act(model, action);
      } catch (err) {
        const refused = domainApiError(err);
        if (refused === undefined) throw err;
        const text = `${model} was not ${action === "load" ? "loaded" : "unloaded"}: ${refused.message}`;
        return modelsPage(c, deps, { kind: "error", text }, refused.status as ContentfulStatusCode);
      }
      // Back to the list (a reload repeats nothing), with what was done.
      return c.redirect(
        `${operatorPath(deps, "/models")}?${new URLSearchParams({ done: action, model })}`,
        303,
      );
    });
  }
}

function doneMessage(c: Context<OperatorEnv>): PageMessage | undefined {
  const { done, model } = c.req.query();
  if (model === undefined) return undefined;
  if (done === "load") return { kind: "success", text: `Loading ${model} on every replica.` };
  if (done === "unload") return { kind: "success", text: `Unloaded ${model}: a request loads it again.` };
  return undefined;
}

function modelsPage(
  c: Context<OperatorEnv>,
  deps: DashboardDeps,
  message: PageMessage | undefined,
  status: ContentfulStatusCode = 200,
): Promise<Response> {
  const auth = operatorAuth(c);
  const entries = deps.catalogue?.list() ?? [];
  return operatorPage(
    c,
    { title: "Models", status, auth },
    <>
      <h1>Models</h1>
      <p>
        <a href={operatorPath(deps)}>Organizations</a>
      </p>
      <MessageNotice message={message} />
      {deps.catalogue === undefined ? (
        <p class="empty">This server has no embedded engine: its models cannot be loaded or unloaded here.</p>
      ) : (
        <section class="card" aria-labelledby="models">
          <h2 id="models">
            {entries.length} model{entries.length === 1 ? "" : "s"}
          </h2>
          <p class="hint">Reload the page to follow a download or a load.</p>
          <table>
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">State</th>
                <th scope="col">Progress</th>
                <th scope="col">Memory</th>
                <th scope="col">Action</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((entry) => (
                <ModelRow auth={auth} entry={entry} />
              ))}
            </tbody>
          </table>
        </section>
      )}
    </>,
  );
}

const ModelRow = ({ auth, entry }: { auth: OperatorAuth; entry: CatalogueEntry }) => {
  const { config, health } = entry;
  const state = health?.state ?? "unloaded";
  const action: ModelAction =
    state === "ready" || state === "loading" || state === "downloading" ? "unload" : "load";
  const ram = health?.memory?.ramBytes;
  return (
    <tr data-model={config.id} data-state={state}>
      <td>
        <code>{config.id}</code>
        {entry.seeded ? null : " (added at run time)"}
      </td>
      <td>{STATE_WORDS[state] ?? state}</td>
      <td>{progressWords(entry)}</td>
      <td>{ram === undefined ? "" : `${(ram / 2 ** 20).toFixed(0)} MiB`}</td>
      <td>
        <OperatorForm auth={auth} action={`/models/${action}`} class="inline">
          <input type="hidden" name="model" value={config.id} />
          <button type="submit" class={action === "unload" ? "danger-outline" : ""}>
            {action === "load" ? "Load" : "Unload"} <span class="visually-hidden">{config.id}</span>
          </button>
        </OperatorForm>
      </td>
    </tr>
  );
};

function progressWords({ health }: CatalogueEntry): string {
  const progress = health?.progress;
  if (health?.error !== undefined) return health.error;
  if (progress === undefined) return "";
  if (health?.state === "downloading") {
    const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
    return progress.totalBytes === undefined
      ? `${mb(progress.downloadedBytes)} MB`
      : `${mb(progress.downloadedBytes)} of ${mb(progress.totalBytes)} MB`;
  }
  if (health?.state === "loading") return `${Math.floor(progress.load * 100)}%`;
  return "";
}
