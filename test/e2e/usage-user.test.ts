// The request's `user` end to end, on the embedded PGlite store and on a real PostgreSQL: a `hearth serve` process
// with the real model records it with each usage record, and `hearth usage --user` (the CLI against the server's
// admin API) counts exactly that user's requests, streamed, not streamed and aborted.
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UsageTotals } from "../../src/usage/queries.js";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";
import { type Backend, STORE_BACKENDS } from "../support/store-backends.js";

const MODEL = "smollm2-135m-instruct";
const MESSAGES: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Name three colors." }];
const STORY: OpenAI.ChatCompletionMessageParam[] = [
  { role: "user", content: "Write a very long story about a lighthouse keeper and the sea." },
];
// OpenAI's advice: a hash of the username or email, never the address itself.
const ALICE = "user-3f5a9c0e1b7d";
const BOB = "user-8e21d4";

type UsageWire = UsageTotals & { user: string | null; groups: ({ key: string } & UsageTotals)[] };

describe.each(STORE_BACKENDS)("the request's user on %s", (_name, makeBackend) => {
  let backend: Backend;
  let server: ServerProcess;
  let client: OpenAI;

  async function usage(...args: string[]): Promise<UsageWire> {
    const { stdout } = await hearthCli(server, ["usage", "--org", "default", "--json", ...args]);
    return JSON.parse(stdout) as UsageWire;
  }

  /** Waits until the meter has written `requests` records in all (it flushes within its interval). */
  async function recorded(requests: number): Promise<void> {
    const deadline = Date.now() + 20_000;
    while ((await usage()).requests < requests) {
      if (Date.now() > deadline) throw new Error(`fewer than ${requests} usage records`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    backend = await makeBackend();
    const { databaseUrl } = backend.options;
    server = await startServerProcess({
      dataDir: backend.options.dataDir,
      ...(databaseUrl === undefined ? {} : { env: { HEARTH_DATABASE_URL: databaseUrl } }),
    });
    client = openaiClient(server);
  });

  afterAll(async () => {
    await server?.stop();
    await backend?.cleanup();
  });

  it("records each request's user; --user totals only that user's requests, exactly", async () => {
    const seen = { requests: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    const add = (u: OpenAI.CompletionUsage | null | undefined) => {
      expect(u).toBeTruthy();
      seen.requests++;
      seen.prompt_tokens += u?.prompt_tokens ?? 0;
      seen.completion_tokens += u?.completion_tokens ?? 0;
      seen.total_tokens += u?.total_tokens ?? 0;
    };

    add(
      (await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 8, user: ALICE }))
        .usage,
    );
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: MESSAGES,
      max_tokens: 8,
      user: ALICE,
      stream: true,
      stream_options: { include_usage: true },
    });
    let last: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) last = chunk.usage ?? last;
    add(last);

    // Bob's request is aborted after its first content; one request sends no user, one an empty one.
    const bobs = await client.chat.completions.create({
      model: MODEL,
      messages: STORY,
      max_tokens: 1500,
      user: BOB,
      stream: true,
    });
    for await (const chunk of bobs) if (chunk.choices[0]?.delta.content) break;
    await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 4 });
    await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 4, user: "" });
    await recorded(5);

    const alice = await usage("--user", ALICE, "--by", "model");
    expect(alice).toMatchObject({ ...seen, user: ALICE, aborted: 0, errors: 0 });
    expect(alice.groups).toEqual([{ key: MODEL, ...totalsOf(alice) }]);
    const bob = await usage("--user", BOB);
    expect(bob).toMatchObject({ user: BOB, requests: 1, aborted: 1 });
    expect(bob.completion_tokens).toBeGreaterThan(0);
    // Neither a prefix nor the empty user matches; without --user every request counts.
    expect((await usage("--user", ALICE.slice(0, -1))).requests).toBe(0);
    const all = await usage();
    expect(all).toMatchObject({ user: null, requests: 5 });
    expect(all.total_tokens).toBeGreaterThan(alice.total_tokens + bob.total_tokens);
  });

  it("prints the user in the table's title and refuses a user no request can have sent", async () => {
    const { stdout } = await hearthCli(server, ["usage", "--org", "default", "--user", ALICE]);
    expect(stdout).toMatch(
      new RegExp(`^Usage of organization "default" by user "${ALICE}" \\(all time\\):\\n`),
    );
    expect(stdout).toMatch(/\ntotal\s+2\s/);
    const tooLong = await hearthCli(server, ["usage", "--org", "default", "--user", "u".repeat(65)]).catch(
      (err: unknown) => err as { stderr?: string; code?: number },
    );
    expect(tooLong).toMatchObject({ code: 1 });
    expect((tooLong as { stderr?: string }).stderr).toMatch(/^hearth: Invalid .*'user'.*64/m);
  });

  it("refuses a user with the form of an API key: 400 on 'user', nothing recorded", async () => {
    const before = (await usage()).requests;
    const error = await client.chat.completions
      .create({ model: MODEL, messages: MESSAGES, max_tokens: 4, user: server.apiKey })
      .catch((err: unknown) => err);
    expect(error).toMatchObject({ status: 400, param: "user", type: "invalid_request_error" });
    expect(String((error as Error).message)).toMatch(/form of an API key/);
    expect((await usage("--user", server.apiKey)).requests).toBe(0);
    expect((await usage()).requests).toBe(before);
  });
});

/** A summary's totals, without the fields only the top level has. */
function totalsOf(summary: UsageWire): UsageTotals {
  const { requests, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, total_tokens } =
    summary;
  return {
    requests,
    prompt_tokens,
    completion_tokens,
    reasoning_tokens,
    cached_tokens,
    total_tokens,
    aborted: summary.aborted,
    errors: summary.errors,
  };
}
