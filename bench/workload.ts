// The fixed workload (prompts, schedule) and the driver that runs it at one concurrency level against a target.
import { percentile } from "./stats.js";

/** Distinct open-ended prompts: long answers (so max_tokens, not EOS, ends them) and little shared text. */
export const PROMPTS: readonly string[] = [
  "Write a long story about a lighthouse keeper who finds a message in a bottle.",
  "Explain in detail how a steam engine works, step by step.",
  "Describe a busy market in a medieval town, with all its sounds and smells.",
  "Write a detailed guide to growing tomatoes in a small garden.",
  "Tell me the history of the bicycle, from its invention to today.",
  "Write a letter from an astronaut on Mars to her family on Earth.",
  "Explain why the sky is blue and why sunsets are red, in depth.",
  "Describe how bread is made, from wheat in the field to the loaf on the table.",
  "Write a fairy tale about a fox, a crow and a wise old tree.",
  "Explain how computers store numbers and text in memory.",
  "Describe a journey by train across a snowy mountain range.",
  "Write an essay about the importance of sleep for health.",
  "Tell a story about two friends who open a bakery together.",
  "Explain how volcanoes form and why they erupt.",
  "Describe the life cycle of a butterfly in detail.",
  "Write a speech for the opening of a new public library.",
];

/** The seed every request sends, so the service and the engine generate the same text. */
export const SEED = 1234;

/** What a target reports while one streamed request runs. */
export type StreamEvent = { type: "text" } | { type: "done"; completionTokens: number };

/** Runs one streamed request for a prompt; the driver timestamps the events as they arrive. */
export type Target = (prompt: string) => AsyncIterable<StreamEvent>;

/** Either keep starting requests until the time box ends, or run exactly these request counts per client. */
export type Schedule = { kind: "seconds"; seconds: number } | { kind: "plan"; perClient: readonly number[] };

export interface LevelResult {
  concurrency: number;
  requests: number;
  completionTokens: number;
  seconds: number;
  tokensPerSecond: number;
  ttftP50: number;
  ttftP95: number;
  itlP50: number;
  itlP95: number;
}

export interface LevelRun {
  result: LevelResult;
  /** Every request's time to first token, ms, in completion order (to pool runs: bench/anchor.ts). */
  ttfts: number[];
  /** Requests each client ran: the plan that repeats this workload. */
  perClient: number[];
}

/** Client i's r-th request: deterministic, so every phase sends the same prompts in the same slots. */
export function promptFor(client: number, round: number): string {
  return PROMPTS[(client + round) % PROMPTS.length] as string;
}

interface RequestSample {
  ttft: number;
  gaps: number[];
  completionTokens: number;
}

async function timeRequest(target: Target, prompt: string): Promise<RequestSample> {
  const start = performance.now();
  let last: number | undefined;
  let ttft: number | undefined;
  const gaps: number[] = [];
  let completionTokens: number | undefined;
  for await (const event of target(prompt)) {
    const now = performance.now();
    if (event.type === "done") {
      completionTokens = event.completionTokens;
      continue;
    }
    if (last === undefined) ttft = now - start;
    else gaps.push(now - last);
    last = now;
  }
  if (completionTokens === undefined) throw new Error("the stream ended without usage");
  // A request that produced no text has no first token; count its whole duration.
  return { ttft: ttft ?? performance.now() - start, gaps, completionTokens };
}

export async function runLevel(target: Target, concurrency: number, schedule: Schedule): Promise<LevelRun> {
  const samples: RequestSample[] = [];
  const perClient = new Array<number>(concurrency).fill(0);
  const start = performance.now();
  const deadline = schedule.kind === "seconds" ? start + schedule.seconds * 1000 : Number.POSITIVE_INFINITY;
  const wanted = (client: number) =>
    schedule.kind === "plan" ? (schedule.perClient[client] ?? 0) : Number.POSITIVE_INFINITY;

  const client = async (id: number) => {
    let round = 0;
    while (round < wanted(id) && performance.now() < deadline) {
      samples.push(await timeRequest(target, promptFor(id, round)));
      round++;
    }
    perClient[id] = round;
  };
  await Promise.all(Array.from({ length: concurrency }, (_, id) => client(id)));
  const seconds = (performance.now() - start) / 1000;

  const completionTokens = samples.reduce((sum, s) => sum + s.completionTokens, 0);
  const ttfts = samples.map((s) => s.ttft);
  const gaps = samples.flatMap((s) => s.gaps);
  return {
    perClient,
    ttfts,
    result: {
      concurrency,
      requests: samples.length,
      completionTokens,
      seconds,
      tokensPerSecond: completionTokens / seconds,
      ttftP50: percentile(ttfts, 50),
      ttftP95: percentile(ttfts, 95),
      itlP50: percentile(gaps, 50),
      itlP95: percentile(gaps, 95),
    },
  };
}
