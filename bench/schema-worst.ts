// Worst-case schemas: how long parsing + planning hold the event loop, and how big the grammar gets, or the 400.
import { pathToFileURL } from "node:url";
import { getLlama, type Llama } from "node-llama-cpp";
import { planGeneration, planPrompt } from "../src/chat/output/plan.js";
import type { TemplateCapabilities } from "../src/chat/template/tool-format.js";
import { ApiError } from "../src/http/errors/api-error.js";
import { parseChatRequest } from "../src/http/openai/chat-request.js";
import { manyOptional, worstSchemas } from "../test/support/adversarial-schemas.js";

const PLAIN: TemplateCapabilities = { tools: undefined, nativeThinking: false };

/**
 * CPU milliseconds of this process since `since`: the work a step does on the event loop, and unlike wall time not
 * inflated by other processes on a shared machine (the code measured is synchronous and single-threaded).
 */
function cpuMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}
const RUNS = 3;

interface Row {
  name: string;
  /** parseChatRequest: zod, schema compilation, the shortest instance, the grammar rules. */
  parseMs: number;
  /** planPrompt + planGeneration: the request's grammar text. */
  planMs: number;
  /** llama.cpp parsing the grammar (synchronous, on the event loop). */
  llamaMs: number;
  grammarBytes: number;
  outcome: string;
}

type Body = Record<string, unknown>;

/** A fresh title each run: the compile cache (keyed by the schema's hash) must not answer. */
function withTitle(schema: Record<string, unknown>, run: number): Record<string, unknown> {
  return { ...schema, title: `bench-${run}-${Math.random()}` };
}

function bodies(): { name: string; body: (run: number) => Body }[] {
  const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
  const rows = worstSchemas().map(({ name, schema }) => ({
    name,
    body: (run: number): Body => ({
      ...base,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: withTitle(schema, run) } },
    }),
  }));
  rows.push({
    name: "128 tools of 30 optional properties",
    body: (run) => ({
      ...base,
      tools: Array.from({ length: 128 }, (_, i) => ({
        type: "function",
        function: { name: `f${i}`, parameters: withTitle(manyOptional(30), run) },
      })),
    }),
  });
  return rows;
}

function measure(llama: Llama, name: string, body: (run: number) => Body): Row {
  const samples: Row[] = [];
  for (let run = 0; run < RUNS; run++) {
    const request = body(run);
    let started = process.cpuUsage();
    let parsed: ReturnType<typeof parseChatRequest>;
    try {
      parsed = parseChatRequest(request, { maxN: 8 });
    } catch (err) {
      const parseMs = cpuMs(started);
      if (!(err instanceof ApiError)) throw err;
      const limit = /limit '(\w+)'/.exec(err.message)?.[1];
      const outcome = `400 ${err.code ?? ""}${limit === undefined ? "" : ` (${limit})`}`;
      samples.push({ name, parseMs, planMs: 0, llamaMs: 0, grammarBytes: 0, outcome });
      continue;
    }
    const parseMs = cpuMs(started);
    started = process.cpuUsage();
    const prompt = planPrompt(parsed.messages, parsed.output, false, PLAIN);
    const plan = planGeneration(prompt, "", parsed.output, PLAIN);
    const planMs = cpuMs(started);
    const grammar = plan.grammar ?? "";
    started = process.cpuUsage();
    // createGrammar parses synchronously inside its promise: the time measured is time the event loop was held.
    void llama.createGrammar({ grammar });
    const llamaMs = cpuMs(started);
    samples.push({ name, parseMs, planMs, llamaMs, grammarBytes: Buffer.byteLength(grammar), outcome: "ok" });
  }
  samples.sort((a, b) => a.parseMs + a.planMs + a.llamaMs - (b.parseMs + b.planMs + b.llamaMs));
  return samples[Math.floor(samples.length / 2)] as Row;
}

/** One row per adversarial schema (median of 3 fresh compilations) as a Markdown table. */
export async function benchSchemaWorst(): Promise<string> {
  const llama = await getLlama({ gpu: false });
  const rows = bodies().map(({ name, body }) => measure(llama, name, body));
  const lines = [
    "Adversarial schemas: CPU ms each step holds the event loop (median of 3, cache missed), grammar size, outcome",
    "",
    "| schema | parse + compile ms | plan ms | llama.cpp grammar ms | total ms | grammar bytes | outcome |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows) {
    const total = r.parseMs + r.planMs + r.llamaMs;
    lines.push(
      `| ${r.name} | ${r.parseMs.toFixed(1)} | ${r.planMs.toFixed(1)} | ${r.llamaMs.toFixed(1)} | ${total.toFixed(1)} | ${r.grammarBytes} | ${r.outcome} |`,
    );
  }
  const worst = Math.max(...rows.map((r) => r.parseMs + r.planMs + r.llamaMs));
  lines.push("", `Longest hold: ${worst.toFixed(1)} ms.`);
  return lines.join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(await benchSchemaWorst());
}
