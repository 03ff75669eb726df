// The active org's rate limits (requests and tokens per minute) and how much of the current minute's window is
// used, with the time until it is replenished in words. Read-only; limits are set by the operator.
import type { Hono } from "hono";
import type { RateLimiter, RateSnapshot, WindowState } from "../../../limits/types.js";
import { formatNumber } from "../chart.js";
import { Notice, renderPage } from "../layout.js";
import type { DashboardDeps, DashboardEnv } from "../session.js";

/** Where current consumption is read (the server's RateLimiter). */
export type LimitsSource = Pick<RateLimiter, "snapshot">;

interface LimitRow {
  id: "requests" | "tokens";
  title: string;
  unit: string;
  limit: number | null;
  state: WindowState | undefined;
}

export function registerLimits(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/limits", async (c) => {
    const auth = c.get("auth");
    const org = await deps.tenancy.orgs.getByName(auth.org.orgName);
    if (org === null) throw new Error(`organization ${auth.org.orgName} vanished while signed in`);
    const subject = { orgId: org.id, orgName: org.name, rpm: org.rpm, tpm: org.tpm };
    let snapshot: RateSnapshot | undefined;
    let readError = false;
    if (deps.limiter !== undefined) {
      try {
        snapshot = await deps.limiter.snapshot(subject);
      } catch {
        // The limits themselves are still worth showing; the notice below says what is missing.
        readError = true;
      }
    }
    const rows: LimitRow[] = [
      {
        id: "requests",
        title: "Requests per minute (RPM)",
        unit: "requests",
        limit: org.rpm,
        state: snapshot?.requests,
      },
      {
        id: "tokens",
        title: "Tokens per minute (TPM)",
        unit: "tokens",
        limit: org.tpm,
        state: snapshot?.tokens,
      },
    ];
    return renderPage(
      c,
      { title: "Limits", active: "limits" },
      <>
        <h1>Limits</h1>
        <p class="hint">
          Limits of <strong>{org.name}</strong>, shared by all its API keys. Each counts in windows of one
          minute that start with the first request; a request that would go over a limit is refused with HTTP
          429 and a <code>retry-after</code> header. Only the operator of this Hearth server can change them.
        </p>
        {readError || deps.limiter === undefined ? (
          <Notice kind="error">
            The current consumption could not be read right now; the limits below are still in force.
          </Notice>
        ) : null}
        <div class="table-wrap">
          <table>
            <caption class="hint">Limits and the current minute of {org.name}</caption>
            <thead>
              <tr>
                <th scope="col">Limit</th>
                <th scope="col">Allowed per minute</th>
                <th scope="col">Used in the current window</th>
                <th scope="col">Remaining</th>
                <th scope="col">Window</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((row) => (
                <LimitTableRow row={row} known={snapshot !== undefined} />
              ))}
            </tbody>
          </table>
        </div>
        <p class="hint">
          A chat completion counts its prompt plus <code>max_tokens</code> (or the rest of the context)
          against the token limit while it runs; when it ends, only the tokens it really used stay counted.
        </p>
      </>,
    );
  });
}

const LimitTableRow = ({ row, known }: { row: LimitRow; known: boolean }) => {
  if (row.limit === null) {
    return (
      <tr data-limit={row.id}>
        <th scope="row">{row.title}</th>
        <td>Unlimited</td>
        <td colspan={3}>Not counted: {row.unit} are not limited.</td>
      </tr>
    );
  }
  const state = row.state;
  if (!known || state === undefined) {
    return (
      <tr data-limit={row.id}>
        <th scope="row">{row.title}</th>
        <td>{formatNumber(row.limit)}</td>
        <td colspan={3}>Unknown right now.</td>
      </tr>
    );
  }
  const used = Math.max(0, state.limit - state.remaining);
  return (
    <tr data-limit={row.id}>
      <th scope="row">{row.title}</th>
      <td>{formatNumber(row.limit)}</td>
      <td data-used={used}>
        {formatNumber(used)} {used === 1 ? row.unit.slice(0, -1) : row.unit} ({percent(used, state.limit)})
      </td>
      <td>{formatNumber(state.remaining)}</td>
      <td>{windowInWords(state)}</td>
    </tr>
  );
};

/** "Resets in 42 seconds"; "No window open: nothing used this minute" when nothing counts. */
export function windowInWords(state: WindowState): string {
  if (state.resetMs <= 0) return "No window open: the full limit is available.";
  return `Resets in ${durationInWords(state.resetMs)}${state.remaining === 0 ? "; until then requests are refused" : ""}.`;
}

/** 950 ms → "1 second", 42_300 → "43 seconds", 90_000 → "1 minute 30 seconds". */
export function durationInWords(ms: number): string {
  const seconds = Math.max(1, Math.ceil(ms / 1000));
  const minutes = Math.floor(seconds / 60);
  const rest = seconds % 60;
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  if (minutes === 0) return plural(rest, "second");
  return rest === 0 ? plural(minutes, "minute") : `${plural(minutes, "minute")} ${plural(rest, "second")}`;
}

function percent(used: number, limit: number): string {
  if (limit <= 0) return "0%";
  const value = (used / limit) * 100;
  return `${value > 0 && value < 1 ? "<1" : Math.round(value)}%`;
}
