// `hearth engine build` and `hearth engine status`: the tuned llama.cpp build in the engine cache.
import type { Command } from "commander";
import { inspectModelFile } from "../catalogue/fetch.js";
import type { HearthConfig } from "../config/schema.js";
import { findEngineBuild, planEngineBuild } from "../engine/llama/engine-build.js";
import {
  buildEngine,
  EngineBuildError,
  engineBuildFailure,
  engineBuildLogPath,
  engineBuildRunning,
} from "../engine/llama/engine-builder.js";

function fail(message: string): never {
  process.stderr.write(`hearth: ${message}\n`);
  process.exit(1);
}

/**
 * The GGUF the new build's self-check runs: the first configured model whose file is already on this machine (the
 * check never fetches one), else undefined. A config that does not load checks with none rather than not building.
 */
async function selfCheckModel(loadConfig: () => HearthConfig): Promise<string | undefined> {
  let config: HearthConfig;
  try {
    config = loadConfig();
  } catch {
    return undefined;
  }
  for (const model of config.models) {
    const file = await inspectModelFile(model, config.modelsDir).catch(() => undefined);
    if (file?.cached === true) return file.path;
  }
  return undefined;
}

export function registerEngineCommands(program: Command, loadConfig: () => HearthConfig): void {
  const engine = program.command("engine").description("the embedded engine's tuned llama.cpp build");

  engine
    .command("build")
    .description("compile llama.cpp and node-llama-cpp's addon for this CPU into the engine cache (offline)")
    .option("--force", "build again even when the cache has this build")
    .action(async (options: { force?: boolean }) => {
      const plan = planEngineBuild();
      try {
        const record = await buildEngine({
          plan,
          force: options.force === true,
          checkModel: await selfCheckModel(loadConfig),
          log: (line) => process.stdout.write(`${line}\n`),
        });
        process.stdout.write(`tuned engine build ${record.key}: ${plan.dir}/${record.folder}\n`);
      } catch (err) {
        if (err instanceof EngineBuildError) fail(`engine build failed: ${err.message}`);
        fail(`engine build failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    });

  engine
    .command("status")
    .description("whether the tuned build for this install and CPU is in the engine cache")
    .option("--json", "machine-readable output")
    .action(async (options: { json?: boolean }) => {
      const plan = planEngineBuild();
      const record = await findEngineBuild(plan);
      const building = await engineBuildRunning(plan);
      const failed = await engineBuildFailure(plan);
      const state =
        record !== undefined
          ? "built"
          : building !== undefined
            ? "building"
            : failed !== undefined
              ? "failed"
              : "missing";
      if (options.json === true) {
        const body = {
          key: plan.key,
          state,
          dir: plan.dir,
          log: engineBuildLogPath(plan),
          build: record ?? null,
        };
        process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
        return;
      }
      const lines = [`tuned engine build ${plan.key}: ${state}`];
      if (record !== undefined)
        lines.push(`  ${plan.dir}/${record.folder} (built ${record.builtAt} in ${record.buildSeconds} s)`);
      if (building !== undefined)
        lines.push(`  building now (pid ${building}; log ${engineBuildLogPath(plan)})`);
      if (state === "missing")
        lines.push("  `hearth engine build` makes it; until then the prebuilt binaries serve");
      process.stdout.write(`${lines.join("\n")}\n`);
    });
}
