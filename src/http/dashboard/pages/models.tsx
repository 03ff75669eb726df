// Models the active org may call: the configured models it has been granted, with their context length and the id
// to put in API calls. Read-only; grants are the operator's (operator view, `hearth orgs grant`).
import type { Hono } from "hono";
import type { ModelInfo } from "../../../engine/types.js";
import { formatNumber } from "../chart.js";
import { Notice, renderPage } from "../layout.js";
import type { DashboardDeps, DashboardEnv } from "../session.js";

/** The configured models (Engine.listModels in the server). */
export type ModelCatalog = () => readonly ModelInfo[];

/** The org's callable models: configured and granted, in the configuration's order. */
export function callableModels(configured: readonly ModelInfo[], granted: ReadonlySet<string>): ModelInfo[] {
  return configured.filter((m) => granted.has(m.id));
}

export function registerModels(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  app.get("/models", async (c) => {
    const auth = c.get("auth");
    const granted = await deps.tenancy.orgs.allowedModels(auth.org.orgId);
    const configured = deps.models?.() ?? [];
    const models = callableModels(configured, granted);
    const unserved = [...granted].filter((id) => !configured.some((m) => m.id === id)).sort();
    const apiBase = `${new URL(c.req.url).origin}/v1`;
    const example = models[0];
    return renderPage(
      c,
      { title: "Models", active: "models" },
      <>
        <h1>Models</h1>
        <p class="hint">
          Models <strong>{auth.org.orgName}</strong> may call through <code>{apiBase}</code>. Put the model id
          in the <code>model</code> field of a chat completion request.
        </p>
        {models.length === 0 ? (
          <Notice kind="info">
            {auth.org.orgName} may not call any model yet: ask the operator of this Hearth server to grant
            one.
          </Notice>
        ) : (
          <div class="table-wrap">
            <table>
              <caption class="hint">Models of {auth.org.orgName}</caption>
              <thead>
                <tr>
                  <th scope="col">Model id</th>
                  <th scope="col">Context length</th>
                </tr>
              </thead>
              <tbody>
                {models.map((m) => (
                  <tr data-model={m.id}>
                    {/* td, not th: the stylesheet capitalises th, and model ids are case-sensitive. */}
                    <td>
                      <code>{m.id}</code>
                    </td>
                    <td>{formatNumber(m.contextSize)} tokens</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {models.length === 0 ? null : (
          <p class="hint">
            The context length is the most a request may use: its prompt plus <code>max_tokens</code>. A
            longer request is refused with <code>context_length_exceeded</code>, never cut short.
          </p>
        )}
        {unserved.length === 0 ? null : (
          <Notice kind="info">
            Also granted, but not served by this server right now: {unserved.join(", ")}. Requests for{" "}
            {unserved.length === 1 ? "it" : "them"} are answered "model not found".
          </Notice>
        )}
        {example === undefined ? null : (
          <section aria-labelledby="models-example">
            <h2 id="models-example">Example</h2>
            <pre class="card">
              <code>{exampleCode(apiBase, example.id)}</code>
            </pre>
          </section>
        )}
      </>,
    );
  });
}

function exampleCode(apiBase: string, model: string): string {
  return [
    'import OpenAI from "openai";',
    "",
    `const client = new OpenAI({ baseURL: "${apiBase}", apiKey: process.env.HEARTH_API_KEY });`,
    "const reply = await client.chat.completions.create({",
    `  model: "${model}",`,
    '  messages: [{ role: "user", content: "Hello" }],',
    "});",
  ].join("\n");
}
