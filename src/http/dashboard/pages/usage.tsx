// Usage of the active org over a chosen period: tokens per day and model (a chart with its data as a table),
// totals, and requests and tokens per model and per API key. Read-only; everyone in the org may see it.
import type { Context, Hono } from "hono";
import { raw } from "hono/html";
import type { UsageGroup, UsageTotals } from "../../../usage/queries.js";
import { colorOf, formatNumber, stackedBarChart } from "../chart.js";
import { Notice, renderPage } from "../layout.js";
import type { DashboardAuth, DashboardDeps, DashboardEnv } from "../session.js";
import {
  DEFAULT_PERIOD,
  loadUsageReport,
  MAX_END_USER_CHARS,
  type PeriodForm,
  parseUsagePeriod,
  USAGE_PERIODS,
  type UsagePeriod,
  type UsageReport,
} from "./usage-report.js";

export function registerUsage(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/usage", async (c) => {
    const auth = c.get("auth");
    const source = deps.usage;
    if (source === undefined) {
      return usagePage(c, { kind: "unavailable" }, 503);
    }
    const parsed = parseUsagePeriod(
      { period: c.req.query("period"), since: c.req.query("since"), until: c.req.query("until") },
      Date.now(),
    );
    // The end user (the requests' `user`): "" = every request.
    const user = c.req.query("user")?.trim() ?? "";
    if (!parsed.ok) {
      return usagePage(c, { kind: "invalid", message: parsed.message, form: parsed.form }, 400, user);
    }
    if (user.length > MAX_END_USER_CHARS) {
      const message = `An end user id is at most ${MAX_END_USER_CHARS} characters (the longest "user" a request can send); this one has ${user.length}.`;
      const form = {
        period: parsed.period.id,
        since: parsed.period.sinceDate,
        until: parsed.period.untilDate,
      };
      return usagePage(c, { kind: "invalid", message, form }, 400, user);
    }
    const [report, keys] = await Promise.all([
      loadUsageReport(source, auth.org.orgId, parsed.period, user === "" ? undefined : user),
      deps.tenancy.keys.list(auth.org.orgName),
    ]);
    const keyNames = new Map(keys.map((k) => [k.id, { name: k.name, short: `sk-…${k.last4}` }]));
    return usagePage(c, { kind: "report", period: parsed.period, report, keyNames }, 200, user);
  });
}

type UsageView =
  | { kind: "unavailable" }
  | { kind: "invalid"; message: string; form: PeriodForm }
  | {
      kind: "report";
      period: UsagePeriod;
      report: UsageReport;
      keyNames: Map<string, KeyName>;
    };

function usagePage(c: Context<DashboardEnv>, view: UsageView, status: 200 | 400 | 503 = 200, user = "") {
  const auth = c.get("auth");
  const form: PeriodForm =
    view.kind === "report"
      ? { period: view.period.id, since: view.period.sinceDate, until: view.period.untilDate }
      : view.kind === "invalid"
        ? view.form
        : { period: DEFAULT_PERIOD, since: "", until: "" };
  return renderPage(
    c,
    { title: "Usage", active: "usage", status },
    <>
      <h1>Usage</h1>
      <p class="hint">
        Requests and tokens of <strong>{auth.org.orgName}</strong>
        {user === "" ? null : (
          <>
            {" "}
            sent with the end user <code>{user}</code>
          </>
        )}
        , counted when each request ends. Days are UTC days.
      </p>
      <PeriodSelector auth={auth} form={form} user={user} />
      {view.kind === "unavailable" ? (
        <Notice kind="error">Usage is not recorded by this server, so there is nothing to show.</Notice>
      ) : view.kind === "invalid" ? (
        <Notice kind="error">{view.message} Nothing is shown until the period is valid.</Notice>
      ) : (
        <Report period={view.period} report={view.report} keyNames={view.keyNames} />
      )}
    </>,
  );
}

const PeriodSelector = ({ auth, form, user }: { auth: DashboardAuth; form: PeriodForm; user: string }) => (
  <form method="get" action={`${auth.base}/usage`} aria-label="Choose the period">
    {auth.memberships.length > 1 ? <input type="hidden" name="org" value={auth.org.orgName} /> : null}
    <div class="head">
      <div class="actions">
        <div class="field">
          <label for="usage-period">Period</label>
          <select id="usage-period" name="period">
            {USAGE_PERIODS.map((p) => (
              <option value={p.id} selected={p.id === form.period}>
                {p.label}
              </option>
            ))}
          </select>
        </div>
        <DateField name="since" label="From" value={form.since} />
        <DateField name="until" label="To" value={form.until} />
        <div class="field">
          <label for="usage-user">End user</label>
          <input id="usage-user" name="user" type="text" value={user} aria-describedby="usage-user-hint" />
        </div>
      </div>
      <button type="submit">Show usage</button>
    </div>
    <p class="hint" id="usage-dates-hint">
      From and To (UTC days, both included) apply when the period is “Between dates”.
    </p>
    <p class="hint" id="usage-user-hint">
      End user: only the requests whose <code>user</code> field was exactly this; empty for every request.
    </p>
  </form>
);

const DateField = ({ name, label, value }: { name: string; label: string; value: string }) => (
  <div class="field">
    <label for={`usage-${name}`}>{label}</label>
    <input id={`usage-${name}`} name={name} type="date" value={value} aria-describedby="usage-dates-hint" />
  </div>
);

interface KeyName {
  name: string | null;
  short: string;
}

const Report = ({
  period,
  report,
  keyNames,
}: {
  period: UsagePeriod;
  report: UsageReport;
  keyNames: Map<string, KeyName>;
}) => {
  const { totals } = report;
  const days = period.days.length;
  const chartDescription =
    totals.requests === 0
      ? `No requests ${period.description}.`
      : `${formatNumber(totals.total_tokens)} tokens in ${formatNumber(totals.requests)} requests ${period.description}, ` +
        `stacked by model over ${days} day${days === 1 ? "" : "s"}; the table after the chart has every value.`;
  return (
    <>
      <section aria-labelledby="usage-chart-heading">
        <h2 id="usage-chart-heading">Tokens per day and model</h2>
        <div class="card">
          {raw(
            stackedBarChart({
              id: "usage-chart",
              title: "Tokens per day and model",
              description: chartDescription,
              categories: period.days.map((d) => d.slice(5)),
              series: report.tokensByModelAndDay.map((s) => ({ name: s.model, values: s.values })),
              unit: "tokens",
              emptyText: "No tokens in this period",
            }),
          )}
        </div>
        <ChartData period={period} report={report} />
      </section>
      <section aria-labelledby="usage-totals">
        <h2 id="usage-totals">Totals {period.description}</h2>
        <TotalsTable totals={totals} />
      </section>
      <section aria-labelledby="usage-models">
        <h2 id="usage-models">By model</h2>
        <GroupTable
          caption="Usage per model"
          first="Model"
          groups={report.byModel}
          totals={totals}
          label={(g) => <code>{g.key}</code>}
        />
      </section>
      <section aria-labelledby="usage-keys">
        <h2 id="usage-keys">By API key</h2>
        <GroupTable
          caption="Usage per API key (keys without requests in this period are left out)"
          first="API key"
          groups={report.byKey}
          totals={totals}
          label={(g) => <KeyLabel id={g.key} known={keyNames.get(g.key)} />}
        />
      </section>
    </>
  );
};

const KeyLabel = ({ id, known }: { id: string; known: KeyName | undefined }) =>
  known === undefined ? (
    <code>{id}</code>
  ) : (
    <>
      {known.name === null ? <span class="empty">(no name)</span> : known.name} <code>{known.short}</code>
    </>
  );

// One row per day and model with tokens: the chart's every value, in the order a screen reader reads best.
// (Names sit in td cells: the stylesheet capitalises th, and model ids are case-sensitive.)
const ChartData = ({ period, report }: { period: UsagePeriod; report: UsageReport }) => {
  const rows = period.days.flatMap((day, i) =>
    report.tokensByModelAndDay
      .map((s, j) => ({ day, model: s.model, color: j, tokens: s.values[i] ?? 0 }))
      .filter((r) => r.tokens > 0),
  );
  if (rows.length === 0) return null;
  return (
    <details>
      <summary>The chart's data as a table</summary>
      <div class="table-wrap">
        <table>
          <caption class="hint">Tokens per day and model (days without requests are left out)</caption>
          <thead>
            <tr>
              <th scope="col">Day (UTC)</th>
              <th scope="col">Model</th>
              <th scope="col">Tokens</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr data-day={r.day} data-model={r.model}>
                <td>{r.day}</td>
                <td>
                  <span aria-hidden="true">{raw(swatch(r.color))}</span> <code>{r.model}</code>
                </td>
                <td>{formatNumber(r.tokens)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  );
};

const TOTAL_COLUMNS = [
  ["Requests", "requests"],
  ["Prompt tokens", "prompt_tokens"],
  ["Completion tokens", "completion_tokens"],
  ["Reasoning tokens", "reasoning_tokens"],
  ["Cached prompt tokens", "cached_tokens"],
  ["Total tokens", "total_tokens"],
  ["Aborted", "aborted"],
  ["Failed", "errors"],
] as const satisfies readonly (readonly [string, keyof UsageTotals])[];

const TotalsTable = ({ totals }: { totals: UsageTotals }) => (
  <div class="table-wrap">
    <table>
      <caption class="hint">
        Reasoning tokens are part of the completion tokens, cached tokens part of the prompt tokens. Aborted:
        the client left before the end; failed: an error after the request was admitted.
      </caption>
      <thead>
        <tr>
          {TOTAL_COLUMNS.map(([title]) => (
            <th scope="col">{title}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        <tr>
          {TOTAL_COLUMNS.map(([, field]) => (
            <td data-total={field}>{formatNumber(totals[field])}</td>
          ))}
        </tr>
      </tbody>
    </table>
  </div>
);

const GROUP_COLUMNS = TOTAL_COLUMNS.slice(0, 6);

const GroupTable = ({
  caption,
  first,
  groups,
  totals,
  label,
}: {
  caption: string;
  first: string;
  groups: UsageGroup[];
  totals: UsageTotals;
  label: (g: UsageGroup) => unknown;
}) =>
  groups.length === 0 ? (
    <p class="empty">No requests in this period.</p>
  ) : (
    <div class="table-wrap">
      <table>
        <caption class="hint">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">{first}</th>
            {GROUP_COLUMNS.map(([title]) => (
              <th scope="col">{title}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {groups.map((g) => (
            <tr>
              <td>{label(g)}</td>
              {GROUP_COLUMNS.map(([, field]) => (
                <td>{formatNumber(g[field])}</td>
              ))}
            </tr>
          ))}
        </tbody>
        <tfoot>
          <tr>
            <th scope="row">Total</th>
            {GROUP_COLUMNS.map(([, field]) => (
              <td>
                <strong>{formatNumber(totals[field])}</strong>
              </td>
            ))}
          </tr>
        </tfoot>
      </table>
    </div>
  );

/** A 12×12 colour square matching the chart's legend. */
function swatch(index: number): string {
  return `<svg width="12" height="12" viewBox="0 0 12 12" focusable="false"><rect width="12" height="12" fill="${colorOf(index)}"/></svg>`;
}
