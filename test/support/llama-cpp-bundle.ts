// The llama.cpp source node-llama-cpp bundles (llama/gitRelease.bundle), checked out for a test: the patch tests
// apply Hearth's llama.cpp patch to it, and one compiles the result.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { nodeLlamaCppDir } from "../../src/engine/llama/engine-build.js";

/** Checks out `paths` (files or folders) of the bundle's commit into the empty folder `dir`; throws saying why not. */
export function checkoutBundledLlamaCpp(dir: string, paths: readonly string[]): void {
  const bundle = join(nodeLlamaCppDir(), "llama", "gitRelease.bundle");
  const steps = [
    ["init", "--quiet"],
    ["fetch", "--quiet", bundle, "HEAD"],
    ["checkout", "--quiet", "FETCH_HEAD", "--", ...paths],
  ];
  for (const args of steps) {
    const done = spawnSync("git", args, { cwd: dir, encoding: "utf8" });
    if (done.status !== 0) throw new Error(`git ${args[0]} of the bundled llama.cpp failed: ${done.stderr}`);
  }
}
