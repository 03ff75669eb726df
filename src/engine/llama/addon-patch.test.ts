// The thread-pool patch still applies to the installed node-llama-cpp's addon: an upgrade that moves the code it
// changes fails here, loudly, before a build would.
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ADDON_PATCH_PATH, nodeLlamaCppDir } from "./engine-build.js";

const work = mkdtempSync(join(tmpdir(), "hearth-addon-patch-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the addon patch", () => {
  it("applies to the installed node-llama-cpp's addon, hunk by hunk, and attaches one pool per context", () => {
    cpSync(join(nodeLlamaCppDir(), "llama", "addon"), join(work, "addon"), { recursive: true });
    const applied = spawnSync("patch", ["-p1", "--forward", "--batch", "-i", ADDON_PATCH_PATH], {
      cwd: work,
      encoding: "utf8",
    });
    // patch reports fuzz and offsets on stdout: an upgrade that shifted the code is told here too.
    expect(applied.stdout + applied.stderr).not.toMatch(/FAILED|fuzz|offset|reversed/i);
    expect(applied.status).toBe(0);
    const source = readFileSync(join(work, "addon", "AddonContext.cpp"), "utf8");
    expect(source).toContain("llama_attach_threadpool(ctx, threadpool, nullptr);");
    // Created right after the context, freed right after it.
    expect(source).toMatch(
      /contextLoaded = context->ctx != nullptr;\s*if \(context->contextLoaded\) \{\s*context->attachThreadpool\(\);/,
    );
    expect(source).toMatch(/llama_free\(currentCtx\);\s*\}\s*ggml_threadpool\* currentThreadpool/);
    // Cheap draws on the calling thread (at most two per decode).
    expect(source).toMatch(/if \(sampleHere && samplesHere < maxSamplesHere && worker->IsCheap\(\)\)/);
  });
});
