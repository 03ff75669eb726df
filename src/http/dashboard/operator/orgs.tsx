// The operator's organizations page: every org with its models and limits; create an org, grant and revoke
// models, set RPM/TPM. Every change goes through `tenancy.orgs` as the actor "admin", so the audit log has it.
import type { Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { EndpointHealth, ModelHealth } from "../../../engine/types.js";
import { ADMIN_ACTOR } from "../../../tenancy/audit.js";
import type { Org } from "../../../tenancy/types.js";
import { domainApiError } from "../../errors/domain-errors.js";
import { formatNumber } from "../chart.js";
import { formatDate, MessageNotice, Notice, type PageMessage } from "../layout.js";
import type { DashboardDeps } from "../session.js";
import { OperatorForm, operatorPage } from "./frame.js";
import { type OperatorAuth, type OperatorEnv, operatorAuth, operatorPath } from "./operator-session.js";

/** What the create form was given, shown again with an error. */
interface CreateForm {
  name: string;
  models: string[];
  rpm: string;
  tpm: string;
}

const EMPTY_FORM: CreateForm = { name: "", models: [], rpm: "", tpm: "" };

export function registerOperatorOrgs(app: Hono<OperatorEnv>, deps: DashboardDeps): void {
  app.get("/", async (c) => orgsPage(c, deps, { message: await doneMessage(c, deps) }));

  app.post("/orgs", async (c) => {
    const form = await c.req.parseBody({ all: true });
    const input: CreateForm = {
      name: field(form.name),
      models: list(form.models),
      rpm: field(form.rpm),
      tpm: field(form.tpm),
    };
    const rpm = parseLimit(input.rpm, "RPM");
    const tpm = parseLimit(input.tpm, "TPM");
    const invalid = [rpm, tpm].find((r) => !r.ok);
    if (invalid !== undefined && !invalid.ok) {
      return orgsPage(
        c,
        deps,
        { message: refusal("The organization was not created", invalid.message), form: input },
        400,
      );
    }
    try {
      await deps.tenancy.orgs.create(input.name, input.models, {
        rpm: rpm.ok ? rpm.value : null,
        tpm: tpm.ok ? tpm.value : null,
        actor: ADMIN_ACTOR,
      });
    } catch (err) {
      return changeRefused(c, deps, err, "The organization was not created", input);
    }
    return done(c, deps, { done: "created", org: input.name });
  });

  // Grant and revoke: the same form (one model), the same refusals.
  for (const [action, past] of [
    ["grant", "granted"],
    ["revoke", "revoked"],
  ] as const) {
    app.post(`/orgs/:name/${action}`, async (c) => {
      const name = c.req.param("name");
      const model = field((await c.req.parseBody()).model);
      try {
        if (action === "grant") await deps.tenancy.orgs.grantModel(name, model, ADMIN_ACTOR);
        else await deps.tenancy.orgs.revokeModel(name, model, ADMIN_ACTOR);
      } catch (err) {
        return changeRefused(c, deps, err, `Nothing was ${past}`);
      }
      return done(c, deps, { done: past, org: name, model });
    });
  }

  app.post("/orgs/:name/limits", async (c) => {
    const name = c.req.param("name");
    const form = await c.req.parseBody();
    const rpm = parseLimit(field(form.rpm), "RPM");
    const tpm = parseLimit(field(form.tpm), "TPM");
    if (!rpm.ok || !tpm.ok) {
      const message = (!rpm.ok ? rpm.message : "") || (!tpm.ok ? tpm.message : "");
      return orgsPage(c, deps, { message: refusal(`The limits of ${name} were not changed`, message) }, 400);
    }
    try {
      await deps.tenancy.orgs.setLimits(name, { rpm: rpm.value, tpm: tpm.value }, ADMIN_ACTOR);
    } catch (err) {
      return changeRefused(c, deps, err, `The limits of ${name} were not changed`);
    }
    return done(c, deps, { done: "limits", org: name });
  });
}

// After a change: back to the list (a reload repeats nothing), scrolled to the org, with what was done.
function done(c: Context<OperatorEnv>, deps: DashboardDeps, params: Record<string, string>): Response {
  const anchor = params.org === undefined ? "" : `#${orgAnchor(params.org)}`;
  return c.redirect(`${operatorPath(deps)}?${new URLSearchParams(params)}${anchor}`, 303);
}

async function doneMessage(c: Context<OperatorEnv>, deps: DashboardDeps): Promise<PageMessage | undefined> {
  const { done: what, org: name = "", model = "" } = c.req.query();
  if (what === undefined) return undefined;
  const org = await deps.tenancy.orgs.getByName(name);
  if (org === null) return undefined;
  switch (what) {
    case "created":
      return { kind: "success", text: `Created the organization ${org.name}.` };
    case "granted":
      return { kind: "success", text: `Granted ${model} to ${org.name}: its keys can call it now.` };
    case "revoked":
      return { kind: "success", text: `Revoked ${model} from ${org.name}: its keys can no longer call it.` };
    case "limits":
      return { kind: "success", text: `Saved the limits of ${org.name}: ${limitsInWords(org)}.` };
    default:
      return undefined;
  }
}

function changeRefused(
  c: Context<OperatorEnv>,
  deps: DashboardDeps,
  err: unknown,
  what: string,
  form?: CreateForm,
): Promise<Response> {
  // The API's status and words (the map says "Choose a model first." for an empty pick); a bug goes up.
  const refused = domainApiError(err);
  if (refused === undefined) throw err;
  return orgsPage(
    c,
    deps,
    { message: refusal(what, refused.message), form },
    refused.status as ContentfulStatusCode,
  );
}

function refusal(what: string, why: string): PageMessage {
  return { kind: "error", text: `${what}: ${why}` };
}

async function orgsPage(
  c: Context<OperatorEnv>,
  deps: DashboardDeps,
  view: { message?: PageMessage | undefined; form?: CreateForm | undefined },
  status: ContentfulStatusCode = 200,
): Promise<Response> {
  const auth = operatorAuth(c);
  const orgs = await deps.tenancy.orgs.list();
  const configured = (deps.models?.() ?? []).map((m) => m.id);
  return operatorPage(
    c,
    { title: "Organizations", status, auth },
    <>
      <h1>Organizations</h1>
      <p>
        <a href={operatorPath(deps, "/models")}>Models</a>: load and unload them.
      </p>
      <MessageNotice message={view.message} />
      <FleetHealth health={deps.health?.() ?? []} />
      <CreateOrgForm auth={auth} configured={configured} form={view.form ?? EMPTY_FORM} />
      <h2>
        {orgs.length} organization{orgs.length === 1 ? "" : "s"}
      </h2>
      {orgs.map((org) => (
        <OrgCard auth={auth} org={org} configured={configured} />
      ))}
    </>,
  );
}

/** The share of prompt tokens taken from a prefix cache; a dash before any was reported. */
function hitRate({
  promptTokens,
  cachedTokens,
}: Pick<EndpointHealth, "promptTokens" | "cachedTokens">): string {
  return promptTokens === 0 ? "—" : `${Math.round((100 * cachedTokens) / promptTokens)}%`;
}

/** A model's hit rate over its endpoints, and its re-pins (docs/fleet.md, "Cache-aware routing"). */
function modelCacheLine(model: ModelHealth): string {
  const endpoints = model.endpoints ?? [];
  const promptTokens = endpoints.reduce((sum, e) => sum + e.promptTokens, 0);
  const cachedTokens = endpoints.reduce((sum, e) => sum + e.cachedTokens, 0);
  const repins = model.repins;
  const moved = repins === undefined ? 0 : repins.endpoint_down + repins.endpoint_busy;
  return (
    `${model.model}: ${hitRate({ promptTokens, cachedTokens })} of prompt tokens from the endpoints' caches; ` +
    `conversations moved ${moved} times (endpoint down ${repins?.endpoint_down ?? 0}, busy ` +
    `${repins?.endpoint_busy ?? 0}); caches lost ${repins?.cache_lost ?? 0} times.`
  );
}

/**
 * Models and, for upstream ones, each endpoint: serving or ejected, what ejected it, and its prefix-cache hit rate
 * (cached ÷ prompt tokens since start). Hidden without upstreams.
 */
const FleetHealth = ({ health }: { health: readonly ModelHealth[] }) => {
  const upstream = health.filter((h) => h.endpoints !== undefined);
  if (upstream.length === 0) return null;
  return (
    <section class="card" aria-labelledby="fleet">
      <h2 id="fleet">Fleet</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Model</th>
            <th scope="col">Endpoint</th>
            <th scope="col">State</th>
            <th scope="col">In flight</th>
            <th scope="col">Cache hits</th>
          </tr>
        </thead>
        <tbody>
          {upstream.flatMap((model) =>
            (model.endpoints ?? []).map((e) => (
              <tr data-model={model.model} data-endpoint={e.url}>
                <td>{model.model}</td>
                <td>{e.url}</td>
                <td>
                  {e.healthy ? "Serving" : `Ejected${e.lastError === undefined ? "" : `: ${e.lastError}`}`}
                </td>
                <td>{e.inFlight}</td>
                <td title={`${e.cachedTokens} of ${e.promptTokens} prompt tokens from the endpoint's cache`}>
                  {hitRate(e)}
                </td>
              </tr>
            )),
          )}
        </tbody>
      </table>
      {upstream.map((m) => (
        <p class="hint" data-cache={m.model}>
          {modelCacheLine(m)}
        </p>
      ))}
      {upstream
        .filter((m) => !m.ready)
        .map((m) => (
          <Notice kind="error">
            {m.model} cannot serve now: {m.detail ?? "no healthy endpoint"}.
          </Notice>
        ))}
    </section>
  );
};

const CreateOrgForm = ({
  auth,
  configured,
  form,
}: {
  auth: OperatorAuth;
  configured: string[];
  form: CreateForm;
}) => (
  <section class="card" aria-labelledby="create-org">
    <h2 id="create-org">Create an organization</h2>
    <OperatorForm auth={auth} action="/orgs">
      <div class="field">
        <label for="new-org-name">Name</label>
        <input id="new-org-name" name="name" type="text" required maxlength={64} value={form.name} />
        <p class="hint">1-64 letters, digits, '.', '_' or '-'; it appears in URLs and in 429 messages.</p>
      </div>
      <fieldset class="field">
        <legend>Models it may call</legend>
        {configured.length === 0 ? <p class="empty">No models are configured.</p> : null}
        {configured.map((id) => (
          <label>
            <input type="checkbox" name="models" value={id} checked={form.models.includes(id)} /> {id}
          </label>
        ))}
      </fieldset>
      <LimitFields idPrefix="new-org" rpm={form.rpm} tpm={form.tpm} />
      <button type="submit">Create organization</button>
    </OperatorForm>
  </section>
);

const OrgCard = ({ auth, org, configured }: { auth: OperatorAuth; org: Org; configured: string[] }) => {
  const grantable = configured.filter((id) => !org.models.includes(id));
  const anchor = orgAnchor(org.name);
  return (
    <section class="card" id={anchor} aria-labelledby={`${anchor}-name`} data-org={org.name}>
      <h3 id={`${anchor}-name`}>{org.name}</h3>
      <p class="hint">
        Created {formatDate(org.createdAt)}. Limits: {limitsInWords(org)}.
      </p>
      <h4>Models</h4>
      {org.models.length === 0 ? (
        <p class="empty">No models granted: its keys can call nothing.</p>
      ) : (
        <ul>
          {org.models.map((model) => (
            <li>
              <code>{model}</code>
              {configured.includes(model) ? null : " (not configured on this server)"}{" "}
              <OperatorForm
                auth={auth}
                action={`/orgs/${encodeURIComponent(org.name)}/revoke`}
                class="inline"
              >
                <input type="hidden" name="model" value={model} />
                <button type="submit" class="danger-outline">
                  Revoke <span class="visually-hidden">{`${model} from ${org.name}`}</span>
                </button>
              </OperatorForm>
            </li>
          ))}
        </ul>
      )}
      {grantable.length === 0 ? null : (
        <OperatorForm auth={auth} action={`/orgs/${encodeURIComponent(org.name)}/grant`} class="row-form">
          <label for={`${anchor}-grant`} class="visually-hidden">
            Model to grant to {org.name}
          </label>
          <select id={`${anchor}-grant`} name="model">
            {grantable.map((id) => (
              <option value={id}>{id}</option>
            ))}
          </select>
          <button type="submit">Grant</button>
        </OperatorForm>
      )}
      <h4>Limits</h4>
      <OperatorForm auth={auth} action={`/orgs/${encodeURIComponent(org.name)}/limits`}>
        <LimitFields idPrefix={anchor} rpm={limitValue(org.rpm)} tpm={limitValue(org.tpm)} />
        <button type="submit">Save limits</button>
      </OperatorForm>
    </section>
  );
};

const LimitFields = ({ idPrefix, rpm, tpm }: { idPrefix: string; rpm: string; tpm: string }) => (
  <div class="actions">
    {(
      [
        ["rpm", "Requests per minute (RPM)", rpm],
        ["tpm", "Tokens per minute (TPM)", tpm],
      ] as const
    ).map(([name, label, value]) => (
      <LimitField id={`${idPrefix}-${name}`} name={name} label={label} value={value} hint={idPrefix} />
    ))}
    <p class="hint" id={`${idPrefix}-limits-hint`}>
      Leave blank or enter 0 for unlimited.
    </p>
  </div>
);

const LimitField = (props: { id: string; name: string; label: string; value: string; hint: string }) => (
  <div class="field">
    <label for={props.id}>{props.label}</label>
    <input
      id={props.id}
      name={props.name}
      type="text"
      inputmode="numeric"
      pattern="[0-9]*"
      value={props.value}
      placeholder="unlimited"
      aria-describedby={`${props.hint}-limits-hint`}
    />
  </div>
);

type LimitParse = { ok: true; value: number | null } | { ok: false; message: string };

/** "" and "0" → unlimited (null); digits → the number; anything else is refused in words. */
export function parseLimit(text: string, name: "RPM" | "TPM"): LimitParse {
  const value = text.replace(/[\s,_]/g, "");
  if (value === "") return { ok: true, value: null };
  if (!/^\d{1,10}$/.test(value)) {
    return {
      ok: false,
      message: `${name} must be a whole number, or blank for unlimited; "${text}" is not.`,
    };
  }
  const n = Number(value);
  return { ok: true, value: n === 0 ? null : n };
}

export function limitsInWords(org: Pick<Org, "rpm" | "tpm">): string {
  const one = (value: number | null, unit: string) =>
    value === null
      ? `unlimited ${unit}s per minute`
      : `${formatNumber(value)} ${unit}${value === 1 ? "" : "s"} per minute`;
  return `${one(org.rpm, "request")}, ${one(org.tpm, "token")}`;
}

function limitValue(value: number | null): string {
  return value === null ? "" : String(value);
}

function orgAnchor(name: string): string {
  return `org-${name}`;
}

function field(value: unknown): string {
  return typeof value === "string" ? value.trim() : "";
}

function list(value: unknown): string[] {
  const values = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return values.filter((v): v is string => typeof v === "string" && v !== "");
}
