// Fuzz: schema-aware mutated requests (test/support/fuzz-requests.ts, seeded) against a real `hearth serve`. Checks
// the issue's targets: no response ≥ 500 other than 503, every error OpenAI-shaped, control tokens in client text
// never switch roles (prompt tokens counted as plain text by the real tokenizer), the server healthy after.
// `node --import tsx bench/fuzz.ts` prints the section; bench/run.ts embeds it (phase `fuzz`).
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { getLlama, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import { ensureModelFile } from "../src/catalogue/fetch.js";
import { loadConfig } from "../src/config/load.js";
import { defaultModels } from "../src/config/schema.js";
import { type FuzzCase, fuzzCases } from "../test/support/fuzz-requests.js";
import { checkResponse, type ResponseCheck } from "../test/support/response-check.js";
import { readBenchOptions } from "./options.js";
import { startDefaultServer } from "./serve-default.js";

export interface FuzzBenchOptions {
  requests?: number;
  seed?: number;
  /** Requests in flight at once. */
  concurrency?: number;
  parallel?: number;
  model?: string;
  /** llama.cpp threads of the server (0: every core). */
  threads?: number;
}

const REQUEST_TIMEOUT_MS = 120_000;
/** Control-token probes re-sent with a baseline to count their prompt tokens (each is two one-token requests). */
const MAX_PROBES = 40;

interface Result extends ResponseCheck {
  /** The case; its body is dropped once answered well (10,000 bodies would hold hundreds of MB). */
  fuzzCase: FuzzCase;
}

async function send(url: string, apiKey: string, fuzzCase: FuzzCase): Promise<Result> {
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": fuzzCase.contentType },
      body: fuzzCase.body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await response.text();
    return { fuzzCase, ...checkResponse(response.status, response.headers.get("content-type") ?? "", text) };
  } catch (err) {
    // No response at all: the server hung (timeout) or dropped the connection (a crash, a reset).
    const cause = err instanceof Error && err.cause !== undefined ? ` (${String(err.cause)})` : "";
    return { fuzzCase, status: -1, problem: `no response: ${String(err)}${cause}` };
  }
}

async function promptTokens(url: string, apiKey: string, model: string, messages: unknown): Promise<number> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages, max_tokens: 1, temperature: 0 }),
  });
  const json = (await response.json()) as { usage?: { prompt_tokens: number } };
  if (json.usage === undefined) throw new Error(`probe answered ${response.status}`);
  return json.usage.prompt_tokens;
}

interface ProbeRow {
  role: string;
  content: string;
  observed: number;
  asText: number;
  asControl: number;
}

/**
 * Whether control-token text in a message was tokenized as text: the message's prompt tokens (its request minus
 * the same request with that content empty) must equal the real tokenizer's count of the text as plain text
 * ("\n" + content: the template's newline after the role goes with the client text), not as control tokens.
 */
async function checkProbes(
  url: string,
  apiKey: string,
  model: string,
  vocab: LlamaModel,
  cases: readonly FuzzCase[],
): Promise<ProbeRow[]> {
  const seen = new Set<string>();
  const rows: ProbeRow[] = [];
  for (const fuzzCase of cases) {
    const probe = fuzzCase.controlProbe;
    if (probe === undefined || rows.length >= MAX_PROBES) continue;
    const at = probe.findIndex((m) => m.content !== "hi" && m.content !== "go on");
    const probed = probe[at];
    if (probed === undefined || seen.has(`${probed.role}\0${probed.content}`)) continue;
    seen.add(`${probed.role}\0${probed.content}`);
    const observed =
      (await promptTokens(url, apiKey, model, probe)) -
      (await promptTokens(
        url,
        apiKey,
        model,
        probe.map((m, i) => (i === at ? { ...m, content: "" } : m)),
      ));
    const count = (special: boolean) =>
      vocab.tokenize(`\n${probed.content}`, special).length - vocab.tokenize("\n", special).length;
    rows.push({
      role: probed.role,
      content: probed.content,
      observed,
      asText: count(false),
      asControl: count(true),
    });
  }
  return rows;
}

const mark = (ok: boolean) => (ok ? "PASS" : "MISS");

/** Runs the fuzz cases against a fresh server and returns a Markdown section body. */
export async function benchFuzz(options: FuzzBenchOptions = {}): Promise<string> {
  const count = options.requests ?? 10_000;
  const seed = options.seed ?? 12;
  const concurrency = options.concurrency ?? 8;
  const parallel = options.parallel ?? 4;
  const model = options.model ?? "smollm2-135m-instruct";
  const configured =
    loadConfig().models.find((m) => m.id === model) ?? defaultModels.find((m) => m.id === model);
  if (configured === undefined)
    throw new Error(`the fuzz bench needs the tokenizer of ${model}: not configured`);
  const cases = fuzzCases({ model, seed, count });
  const probeCases: FuzzCase[] = [];

  // A queue as long as the fuzzer's concurrency: 503s stay possible (allowed) but rare.
  const server = await startDefaultServer({
    model,
    parallel,
    maxQueue: 4 * concurrency,
    threads: options.threads ?? 0,
  });
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const vocab = await llama.loadModel({
    modelPath: await ensureModelFile(configured, { modelsDir: loadConfig().modelsDir }),
    vocabOnly: true,
  });
  try {
    const results: Result[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        // One generator shared by the workers: each takes the next case when it is free.
        for (let taken = cases.next(); taken.done !== true; taken = cases.next()) {
          const fuzzCase = taken.value;
          if (fuzzCase.controlProbe !== undefined) probeCases.push(fuzzCase);
          const result = await send(server.url, server.apiKey, fuzzCase);
          const bad = result.problem !== undefined || (result.status >= 500 && result.status !== 503);
          results.push(bad ? result : { ...result, fuzzCase: { ...fuzzCase, body: "" } });
          if (results.length % 1000 === 0) process.stderr.write(`fuzz: ${results.length}/${count}\n`);
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    const crashed = server.child.exitCode !== null;

    const byStatus = new Map<number, number>();
    for (const r of results) byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
    const serverErrors = results.filter((r) => r.status >= 500 && r.status !== 503);
    const noResponse = results.filter((r) => r.status === -1);
    const errors = results.filter((r) => r.status !== 200 && r.status !== -1);
    const malformed = results.filter((r) => r.problem !== undefined && r.status !== -1);
    const streamErrors = results.filter((r) => r.streamError === true);
    const byMutation = new Map<string, Map<number, number>>();
    for (const r of results) {
      for (const m of r.fuzzCase.mutations) {
        const kind = m.split(":")[0] as string;
        const row = byMutation.get(kind) ?? new Map<number, number>();
        row.set(r.status, (row.get(r.status) ?? 0) + 1);
        byMutation.set(kind, row);
      }
    }

    const probes = crashed ? [] : await checkProbes(server.url, server.apiKey, model, vocab, probeCases);
    const probesOk = probes.length > 0 && probes.every((p) => p.observed === p.asText);

    // Healthy after: /health 200 and one normal request answered.
    const health = crashed ? 0 : (await fetch(`${server.url}/health`).catch(() => undefined))?.status;
    const normal = crashed
      ? undefined
      : await fetch(`${server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 4 }),
        }).catch(() => undefined);
    const normalBody = (await normal?.json().catch(() => ({}))) as { choices?: unknown } | undefined;
    const normalOk = normal?.status === 200 && normalBody?.choices !== undefined;

    // Failing cases in full, to reproduce them (bodies can be megabytes: a file, not the report).
    const failing = [...serverErrors, ...noResponse, ...malformed];
    let failuresFile = "";
    if (failing.length > 0) {
      // Beside the machine's temporary files, not bench/results (committed): a reproduction, not a result.
      failuresFile = join(tmpdir(), `hearth-fuzz-failures-seed${seed}.json`);
      writeFileSync(
        failuresFile,
        JSON.stringify(
          failing.map((r) => ({
            index: r.fuzzCase.index,
            status: r.status,
            problem: r.problem,
            mutations: r.fuzzCase.mutations,
            contentType: r.fuzzCase.contentType,
            body:
              typeof r.fuzzCase.body === "string"
                ? r.fuzzCase.body
                : { base64: Buffer.from(r.fuzzCase.body).toString("base64") },
          })),
          null,
          1,
        ),
      );
    }
    const errorLines = server
      .output()
      .split("\n")
      .filter((l) => /"level":(50|60)/.test(l));

    const statuses = [...byStatus]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `| ${s === -1 ? "no response" : s} | ${n} |`);
    const mutationRows = [...byMutation]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([kind, row]) => {
        const cells = [...row].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`);
        return `| ${kind} | ${cells.join(", ")} |`;
      });
    const show = (text: string) => JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);
    return [
      `${results.length} requests (seed ${seed}, ${concurrency} in flight) in ${elapsed.toFixed(0)} s against ` +
        `\`hearth serve --parallel ${parallel} --max-queue ${4 * concurrency}\`; admitted requests generate at most a few tokens.`,
      "",
      "| status | count |",
      "| --- | ---: |",
      ...statuses,
      "",
      "| mutation | statuses |",
      "| --- | --- |",
      ...mutationRows,
      "",
      "| target | measured | result |",
      "| --- | --- | --- |",
      `| 0 responses ≥ 500 other than 503 | ${serverErrors.length}${serverErrors.length === 0 ? "" : ` (first: case ${serverErrors[0]?.fuzzCase.index}, ${serverErrors[0]?.fuzzCase.mutations.join(" + ")})`} | ${mark(serverErrors.length === 0)} |`,
      `| every request answered (no hang, no dropped connection) | ${noResponse.length} without a response${noResponse.length === 0 ? "" : ` (${noResponse.map((r) => `case ${r.fuzzCase.index} ${r.fuzzCase.mutations.join(" + ")}: ${r.problem?.replace("no response: ", "")}`).join("; ")})`}${crashed ? "; the server process EXITED" : ""} | ${mark(noResponse.length === 0 && !crashed)} |`,
      `| every error body OpenAI-shaped (\`{"error":{"message","type","param","code"}}\`), 200s whole | ${malformed.length} of ${errors.length} errors and ${results.length - errors.length} 200s malformed${malformed.length === 0 ? "" : ` (first: ${malformed[0]?.problem})`}; ${streamErrors.length} streams with an error event | ${mark(malformed.length === 0)} |`,
      `| control tokens in content keep the client's role | ${probes.filter((p) => p.observed === p.asText).length} of ${probes.length} probes tokenized as plain text | ${mark(probesOk)} |`,
      `| healthy after (/health 200, one normal request 200) | /health ${health ?? "no answer"}, request ${normal?.status ?? "no answer"} | ${mark(health === 200 && normalOk)} |`,
      "",
      "Control-token probes: the message's prompt tokens (request minus the same request with that content empty), and " +
        "what the model's tokenizer counts for the text as plain text vs with control tokens parsed:",
      "",
      "| role | content | prompt tokens | as text | as control tokens |",
      "| --- | --- | ---: | ---: | ---: |",
      ...probes
        .slice(0, 12)
        .map(
          (p) =>
            `| ${p.role} | \`${show(p.content).replaceAll("|", "\\|")}\` | ${p.observed} | ${p.asText} | ${p.asControl} |`,
        ),
      ...(probes.length > 12 ? [`| … ${probes.length - 12} more | | | | |`] : []),
      "",
      `Server log lines at error level or above: ${errorLines.length}${errorLines.length === 0 ? "" : ` (first: \`${errorLines[0]?.slice(0, 400)}\`)`}.` +
        (failuresFile === "" ? "" : ` Failing cases written to \`${failuresFile}\`.`),
    ].join("\n");
  } finally {
    await vocab.dispose();
    await llama.dispose();
    await server.stop();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = readBenchOptions();
  benchFuzz({ requests: options.fuzzRequests, seed: options.fuzzSeed, threads: options.serverThreads }).then(
    (section) => process.stdout.write(`${section}\n`),
    (err: unknown) => {
      process.stderr.write(`fuzz benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
