// The fleet's prefix-cache hit rate and time to first token with cache-aware routing on and off: two gateways over
// the same two workers, one with `upstream.affinity: false`, driven alike in interleaved rounds (on, off, off, on…).
import { performance } from "node:perf_hooks";
import { MIN_HIT_TOKENS } from "../src/engine/upstream/cache-affinity.js";
import { median } from "./stats.js";

export interface AffinityBenchOptions {
  /** Conversations running at once in each round. */
  conversations: number;
  /** Turns of each conversation (its first turn cannot hit; the later ones can). */
  turns: number;
  /** Pairs of rounds; each pair is on-off then off-on (ABBA), so a machine that drifts moves both sides alike. */
  pairs: number;
}

export interface AffinityGateway {
  url: string;
  apiKey: string;
  /** The model id the gateway serves over the workers. */
  model: string;
}

/** One turn as the client saw it: ms to the first byte of the stream (the gateway sends it with the first token). */
interface Turn {
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
  reply: string;
}

interface Message {
  role: "system" | "user" | "assistant";
  content: string;
}

const QUESTIONS = [
  "What do you sell?",
  "Who founded you?",
  "Where are you based?",
  "How big are you?",
  "Do you ship abroad?",
  "What are your hours?",
];

/** Longest pause between a reply and the conversation's next turn (a user reading it). */
const MAX_THINK_MS = 300;

/**
 * The pause before turn `t` of conversation `c`: the same on both sides (a fixed pseudo-random spread), so the
 * conversations' turns do not arrive in lockstep; in lockstep, least-busy routing sends each conversation to the
 * same worker every turn by the order alone, which measures the order, not the routing.
 */
function thinkMs(c: number, t: number): number {
  let x = Math.imul(c + 1, 0x9e3779b1) ^ Math.imul(t + 1, 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 15), 0x2c1b3c6d);
  return ((x ^ (x >>> 12)) >>> 0) % MAX_THINK_MS;
}

/** A streamed turn with usage; the reply's text grows the conversation. */
async function turn(gateway: AffinityGateway, messages: Message[]): Promise<Turn> {
  const started = performance.now();
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: gateway.model,
      messages,
      max_tokens: 8,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!response.ok || response.body === null) {
    throw new Error(`${gateway.url} answered ${response.status}: ${await response.text()}`);
  }
  let ttftMs: number | undefined;
  let text = "";
  const decoder = new TextDecoder();
  for await (const bytes of response.body) {
    ttftMs ??= performance.now() - started;
    text += decoder.decode(bytes, { stream: true });
  }
  const result: Turn = { ttftMs: ttftMs ?? Number.NaN, promptTokens: 0, cachedTokens: 0, reply: "" };
  for (const frame of text.split("\n\n")) {
    const data = frame.trim().replace(/^data: /, "");
    if (!data.startsWith("{")) continue;
    const chunk = JSON.parse(data) as {
      choices?: { delta?: { content?: string } }[];
      usage?: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | null;
      error?: { message?: string };
    };
    if (chunk.error !== undefined) throw new Error(`stream error: ${chunk.error.message ?? data}`);
    result.reply += chunk.choices?.[0]?.delta?.content ?? "";
    if (chunk.usage != null) {
      result.promptTokens = chunk.usage.prompt_tokens;
      result.cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
    }
  }
  return result;
}

/**
 * One round on one gateway: `conversations` at once, each `turns` turns in a row under its own ~600-token system
 * prompt, new in every round (a round never finds a cache an earlier one left). Returns the follow-up turns (2+).
 */
async function round(gateway: AffinityGateway, tag: string, options: AffinityBenchOptions): Promise<Turn[]> {
  const followUps: Turn[][] = await Promise.all(
    Array.from({ length: options.conversations }, async (_, c) => {
      const system = `Round ${tag}, shop ${c}. You are the assistant of shop ${c}. ${"Answer politely, briefly and only about the shop. ".repeat(45)}`;
      const messages: Message[] = [{ role: "system", content: system }];
      const later: Turn[] = [];
      for (let t = 0; t < options.turns; t++) {
        if (t > 0) await new Promise((resolve) => setTimeout(resolve, thinkMs(c, t)));
        messages.push({ role: "user", content: QUESTIONS[t % QUESTIONS.length] as string });
        const served = await turn(gateway, messages);
        messages.push({ role: "assistant", content: served.reply });
        if (t > 0) later.push(served);
      }
      return later;
    }),
  );
  return followUps.flat();
}

/** Markdown lines: the hit rate and TTFT of follow-up turns through each gateway, by round, and their medians. */
export async function affinityComparison(
  on: AffinityGateway,
  off: AffinityGateway,
  options: AffinityBenchOptions,
): Promise<string[]> {
  const sides = { on, off };
  const results: { side: keyof typeof sides; turns: Turn[] }[] = [];
  for (let pair = 0; pair < options.pairs; pair++) {
    const order: (keyof typeof sides)[] =
      pair % 2 === 0 ? ["on", "off", "off", "on"] : ["off", "on", "on", "off"];
    for (const [i, side] of order.entries()) {
      results.push({ side, turns: await round(sides[side], `${pair}.${i}.${side}`, options) });
    }
  }
  const hitRate = (turns: Turn[]) =>
    turns.reduce((s, t) => s + t.cachedTokens, 0) /
    Math.max(
      1,
      turns.reduce((s, t) => s + t.promptTokens, 0),
    );
  const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
  const rows = results.map(
    ({ side, turns }, i) =>
      `| ${i + 1} | ${side} | ${pct(hitRate(turns))} | ${turns.filter((t) => t.cachedTokens >= MIN_HIT_TOKENS).length} / ${turns.length} | ${median(turns.map((t) => t.ttftMs)).toFixed(0)} |`,
  );
  const summary = (side: keyof typeof sides) => {
    const turns = results.filter((r) => r.side === side).flatMap((r) => r.turns);
    return `| ${side} | ${pct(hitRate(turns))} | ${median(turns.map((t) => t.ttftMs)).toFixed(0)} |`;
  };
  return [
    `Cache-aware routing on and off: ${options.conversations} conversations at once, ${options.turns} turns each ` +
      `(streamed, max_tokens 8, a new ~600-token system prompt per conversation and round, 0–${MAX_THINK_MS} ms ` +
      "between a reply and the next turn), through a gateway with " +
      "`upstream.affinity` on and one with it off over the same two workers, in interleaved rounds " +
      `(${options.pairs === 1 ? "on, off, off, on" : `${options.pairs} pairs of on, off, off, on / off, on, on, off`}). ` +
      "Follow-up turns (2+) only: a first turn cannot hit. Hit rate = cached ÷ prompt tokens as the workers reported " +
      `them; a turn hit when it reused at least ${MIN_HIT_TOKENS} tokens (less is the prompt's shared opening); ` +
      "TTFT = ms from the request to the stream's first byte.",
    "",
    "| round | affinity | hit rate | turns with a hit | TTFT p50 ms |",
    "| ---: | --- | ---: | ---: | ---: |",
    ...rows,
    "",
    "| affinity | hit rate, all rounds | TTFT p50 ms, all rounds |",
    "| --- | ---: | ---: |",
    summary("on"),
    summary("off"),
  ];
}
