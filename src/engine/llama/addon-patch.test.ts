// The engine build's patches still apply, the addon patch to the installed node-llama-cpp's addon and the AMX
// patch to the llama.cpp it bundles: an upgrade that moves the code they change fails here, loudly, before a build
// would.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkoutBundledLlamaCpp } from "../../../test/support/llama-cpp-bundle.js";
import { ADDON_PATCH_PATH, LLAMA_CPP_PATCH_PATH, nodeLlamaCppDir } from "./engine-build.js";

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
    // Cheap draws on the calling thread (at most two per decode, unless an argmax), an argmax before the chain.
    expect(source).toMatch(
      /if \(sampleHere && worker->IsCheap\(\) && \(worker->IsArgmax\(\) \|\| samplesHere < maxSamplesHere\)\)/,
    );
    const argmax =
      /if \(IsArgmax\(\) && hearthArgmaxToken\([^)]*\)\) \{[^}]*\}\s*llama_token_data_array cur_p;/;
    expect(source).toMatch(new RegExp(`${argmax.source}\\s*sampler->sampleAndReleaseLock`));
  });
});

describe("the llama.cpp patch", () => {
  it("applies to the bundled llama.cpp, hunk by hunk, and loads the AMX tile configuration from constant data", () => {
    const path = "ggml/src/ggml-cpu/amx/mmq.cpp";
    const tree = join(work, "llama.cpp");
    mkdirSync(tree);
    checkoutBundledLlamaCpp(tree, [path]);
    // The bug: the configuration filled field by field in a stack buffer (whose stores GCC drops).
    expect(readFileSync(join(tree, path), "utf8")).toMatch(
      /alignas\(64\) tile_config_t tc = \{\};[\s\S]*_tile_loadconfig\(&tc\);/,
    );
    const applied = spawnSync("patch", ["-p1", "--forward", "--batch", "-i", LLAMA_CPP_PATCH_PATH], {
      cwd: tree,
      encoding: "utf8",
    });
    expect(applied.stdout + applied.stderr).not.toMatch(/FAILED|fuzz|offset|reversed/i);
    expect(applied.status).toBe(0);
    const source = readFileSync(join(tree, path), "utf8");
    expect(source).toMatch(/alignas\(64\) static const tile_config_t ggml_amx_tile_config = \{/);
    expect(source).toContain("_tile_loadconfig(&ggml_amx_tile_config);");
    expect(source).not.toContain("tile_config_t tc");
  });
});
