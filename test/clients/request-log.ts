// What the tier's server says it served, from its request log (one JSON line per request, written by the
// request-id middleware): how a test shows which endpoint a client library really called.
import { readFileSync, statSync } from "node:fs";
import { inject } from "vitest";

export interface ServedRequest {
  method: string;
  path: string;
  status: number;
}

/**
 * A place in the log: the requests served after it are the ones a test's client made (files run one at a time).
 * A request's line is written just after its response (and then copied from the server's stdout): the mark waits
 * until the log is quiet, so the lines of requests that just finished (a failed test's too) fall before it.
 */
export async function logMark(): Promise<number> {
  return quietSize();
}

async function quietSize(quietMs = 300): Promise<number> {
  const file = inject("hearthLogFile");
  let size = statSync(file).size;
  for (let waited = 0; waited < 5_000; waited += quietMs) {
    await new Promise((resolve) => setTimeout(resolve, quietMs));
    const now = statSync(file).size;
    if (now === size) break;
    size = now;
  }
  return size;
}

function parse(text: string): ServedRequest[] {
  const served: ServedRequest[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (entry.msg !== "request") continue;
    const { method, path, status } = entry;
    if (typeof method === "string" && typeof path === "string" && typeof status === "number") {
      served.push({ method, path, status });
    }
  }
  return served;
}

/** The requests served since `mark`, once the log is quiet (see logMark). */
export async function servedSince(mark: number): Promise<ServedRequest[]> {
  const end = await quietSize();
  return parse(readFileSync(inject("hearthLogFile")).subarray(mark, end).toString());
}

/** `METHOD path` of each request, for assertions that read like the log. */
export function routes(served: readonly ServedRequest[]): string[] {
  return served.map((request) => `${request.method} ${request.path}`);
}
