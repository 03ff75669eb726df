// Prefix reuse as a number (issue 13, item 4): the TTFT of a request whose ~1,000-token system prompt an earlier
// request of the same organization already sent (warm) against the first one to send it (cold). Each trial's system
// prompt is new (it names the trial first), so every cold request is cold; trials alternate cold, warm.
// `node --import tsx bench/prefix-reuse.ts` prints the section; bench/run.ts embeds it (phase `prefix`).
import { pathToFileURL } from "node:url";
import { readBenchOptions } from "./options.js";
import { startDefaultServer } from "./serve-default.js";
import { median } from "./stats.js";

export interface PrefixReuseOptions {
  trials?: number;
  model?: string;
}

/** ≈ 1,000 tokens of a system prompt (SmolLM2's tokenizer: 1,050–1,100 with the template). */
const RULES = [
  "answer in plain English and keep every sentence short",
  "never invent a fact; say that you do not know instead",
  "when asked for code, give a complete program that runs",
  "prefer concrete examples over abstract explanations",
  "ask one clarifying question when a request is ambiguous",
  "use metric units unless the user asks for others",
];
const SYSTEM = Array.from({ length: 72 }, (_, i) => `Rule ${i + 1}: ${RULES[i % RULES.length]}.`).join(" ");
const QUESTIONS = ["How do plants make their food?", "Why do cats purr?"] as const;

interface Sample {
  ttft: number;
  promptTokens: number;
  cachedTokens: number;
}

const TARGET = 0.3;

/** Runs the phase and returns a Markdown section body. */
export async function benchPrefixReuse(options: PrefixReuseOptions = {}): Promise<string> {
  const trials = options.trials ?? 6;
  const model = options.model ?? "smollm2-135m-instruct";
  const server = await startDefaultServer({ model, parallel: 4, maxQueue: 4, threads: 0 });
  try {
    const send = (system: string, question: string) =>
      timeToFirstToken(server.url, server.apiKey, model, [
        { role: "system", content: system },
        { role: "user", content: question },
      ]);
    // Warm-up: weights paged in, the template compiled.
    await send("Warm-up.", QUESTIONS[0]);
    const cold: Sample[] = [];
    const warm: Sample[] = [];
    for (let trial = 0; trial < trials; trial++) {
      const system = `Trial ${trial + 1} of the prefix benchmark. ${SYSTEM}`;
      cold.push(await send(system, QUESTIONS[0]));
      warm.push(await send(system, QUESTIONS[1]));
      process.stderr.write(
        `prefix trial ${trial + 1}/${trials}: cold ${cold.at(-1)?.ttft.toFixed(0)} ms, warm ${warm.at(-1)?.ttft.toFixed(0)} ms\n`,
      );
    }
    return render(cold, warm);
  } finally {
    await server.stop();
  }
}

function render(cold: Sample[], warm: Sample[]): string {
  const c = median(cold.map((s) => s.ttft));
  const w = median(warm.map((s) => s.ttft));
  const ratio = w / c;
  const row = (name: string, samples: Sample[], p50: number) =>
    `| ${name} | ${p50.toFixed(1)} | ${samples.map((s) => s.ttft.toFixed(0)).join(", ")} | ${median(samples.map((s) => s.promptTokens))} | ${median(samples.map((s) => s.cachedTokens))} |`;
  return [
    `\`hearth serve\` of the default model (\`parallel 4\`, every core); ${cold.length} trials, each a new ` +
      "≈ 1,000-token system prompt sent first with one question (cold), then with another (warm); streamed, " +
      "time to the first content token.",
    "",
    "| request | TTFT p50 ms | every trial's TTFT ms | prompt tokens | cached tokens (usage) |",
    "| --- | ---: | --- | ---: | ---: |",
    row("cold", cold, c),
    row("warm (same system prompt, same organization)", warm, w),
    "",
    `- warm ÷ cold TTFT ≤ ${TARGET}: ${ratio.toFixed(3)} — ${ratio <= TARGET ? "PASS" : "MISS"}`,
  ].join("\n");
}

/** One streamed request: ms to the first non-empty content delta, and the usage it reports. */
async function timeToFirstToken(
  url: string,
  apiKey: string,
  model: string,
  messages: { role: string; content: string }[],
): Promise<Sample> {
  const start = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 8,
      temperature: 0,
    }),
  });
  if (!response.ok || response.body === null)
    throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  let ttft: number | undefined;
  let usage: { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
  let buffered = "";
  const decoder = new TextDecoder();
  for await (const bytes of response.body) {
    buffered += decoder.decode(bytes, { stream: true });
    const events = buffered.split("\n\n");
    buffered = events.pop() ?? "";
    for (const event of events) {
      const data = event.replace(/^data: /, "");
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data) as {
        choices: { delta?: { content?: string | null } }[];
        usage?: typeof usage | null;
      };
      if (ttft === undefined && (chunk.choices[0]?.delta?.content ?? "") !== "")
        ttft = performance.now() - start;
      if (chunk.usage) usage = chunk.usage;
    }
  }
  if (ttft === undefined) throw new Error("the stream had no content");
  return {
    ttft,
    promptTokens: usage?.prompt_tokens ?? Number.NaN,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? Number.NaN,
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  readBenchOptions();
  benchPrefixReuse().then(
    (section) => process.stdout.write(`${section}\n`),
    (err: unknown) => {
      process.stderr.write(`prefix benchmark failed: ${String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
