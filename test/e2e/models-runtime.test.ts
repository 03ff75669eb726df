// Models added, unloaded and removed at run time with the CLI, on two `hearth serve` replicas sharing PostgreSQL and
// Redis: the other replica follows at once, and the change survives a restart.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { type ReplicaPair, startReplicaPair } from "../support/replicas.js";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  startServerProcess,
} from "../support/server-process.js";

const ADDED = "smol-added";

let pair: ReplicaPair;
let shared: Record<string, string>;
let first: ServerProcess;
let second: ServerProcess;
/** The default model's file, added again under another id as a local source (nothing downloaded). */
let file: string;

async function hearth(server: ServerProcess, ...args: string[]): Promise<string> {
  return (await hearthCli(server, args, shared)).stdout;
}

interface Health {
  models: { id: string; state?: string }[];
}

async function stateOn(server: ServerProcess, id: string): Promise<string | undefined> {
  const health = (await (await fetch(`${server.url}/health`)).json()) as Health;
  return health.models.find((m) => m.id === id)?.state;
}

/** Polls every 100 ms until `check` holds; fails after `ms` (a bound, not a timing assertion). */
async function until(what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
  const base = config.models[0];
  if (base === undefined) throw new Error("no default model");
  file = await ensureModelFile(base, { modelsDir: config.modelsDir });
  pair = await startReplicaPair();
  ({ shared, first, second } = pair);
});

afterAll(async () => {
  await pair?.stop();
});

describe("models at run time across replicas", () => {
  it("adds a model with the CLI: both replicas serve it, it survives a restart, and is removed everywhere", async () => {
    const added = await hearth(
      first,
      "models",
      "add",
      ADDED,
      "--source",
      file,
      "--context-size",
      "1024",
      "--parallel",
      "2",
    );
    expect(added).toContain(`Added model ${ADDED}.`);
    expect(added).toContain(`Model ${ADDED} is ready.`);

    const listed = JSON.parse(await hearth(first, "models", "list", "--json")) as {
      id: string;
      state?: string;
      added?: boolean;
    }[];
    expect(listed.find((m) => m.id === ADDED)).toMatchObject({ state: "ready", added: true });
    const table = await hearth(first, "models", "list");
    expect(table).toMatch(new RegExp(`^${ADDED}\\s+.*\\s+ready\\s+`, "m"));

    // The other replica heard of it over Redis and loads it too; granted once (the store is shared), served there.
    await until(
      "the second replica serves the added model",
      async () => (await stateOn(second, ADDED)) === "ready",
    );
    await hearth(first, "orgs", "grant", "default", ADDED);
    const reply = await openaiClient(second, first.apiKey).chat.completions.create({
      model: ADDED,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 2,
    });
    expect(reply.model).toBe(ADDED);

    // Unloaded on every replica.
    expect(await hearth(first, "models", "unload", ADDED)).toContain(`Unloaded model ${ADDED}.`);
    expect(await stateOn(first, ADDED)).toBe("unloaded");
    await until("the second replica unloaded it", async () => (await stateOn(second, ADDED)) === "unloaded");

    // A restart of the first replica: the stored catalogue brings the model back (and loads it at start).
    await first.stop();
    first = await startServerProcess({ env: shared, args: ["--parallel", "2"], bootstrap: false });
    pair.first = first;
    await until(
      "the restarted replica serves the added model",
      async () => (await stateOn(first, ADDED)) === "ready",
    );

    expect(await hearth(first, "models", "remove", ADDED)).toContain(`Removed model ${ADDED}.`);
    expect(await stateOn(first, ADDED)).toBeUndefined();
    await until("the second replica removed it", async () => (await stateOn(second, ADDED)) === undefined);
    const failure = await hearthCli(first, ["models", "load", ADDED], shared).then(
      () => "",
      (err: { stderr: string }) => err.stderr,
    );
    expect(failure).toContain(`No model ${ADDED} is configured.`);
  });
});
