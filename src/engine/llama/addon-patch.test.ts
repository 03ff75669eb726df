// The engine build's patches still apply, the addon patch to the installed node-llama-cpp's addon and the AMX
// patch to the llama.cpp it bundles: an upgrade that moves the code they change fails here, loudly, before a build
// would.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkoutBundledLlamaCpp } from "../../../test/support/llama-cpp-bundle.js";
import { ADDON_PATCH_PATH, LLAMA_CPP_PATCHES, nodeLlamaCppDir } from "./engine-build.js";

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
    // The draws of a direct step: one call, registered on the context's class.
    expect(source).toContain('InstanceMethod("hearthArgmax", &AddonContext::HearthArgmax)');
    expect(source).toMatch(/Napi::Value AddonContext::HearthArgmax\([^)]*\) \{[\s\S]*?hearthArgmaxToken\(/);
    const header = readFileSync(join(work, "addon", "AddonContext.h"), "utf8");
    expect(header).toContain("Napi::Value HearthArgmax(const Napi::CallbackInfo& info);");
  });
});

describe("the llama.cpp patches", () => {
  it("applies to the bundled llama.cpp, hunk by hunk, and loads the AMX tile configuration from constant data", () => {
    const path = "ggml/src/ggml-cpu/amx/mmq.cpp";
    const tree = join(work, "llama.cpp-amx");
    mkdirSync(tree);
    checkoutBundledLlamaCpp(tree, [path]);
    // The bug: the configuration filled field by field in a stack buffer (whose stores GCC drops).
    expect(readFileSync(join(tree, path), "utf8")).toMatch(
      /alignas\(64\) tile_config_t tc = \{\};[\s\S]*_tile_loadconfig\(&tc\);/,
    );
    const applied = spawnSync(
      "patch",
      ["-p1", "--forward", "--batch", "-i", LLAMA_CPP_PATCHES.amxTileConfig],
      {
        cwd: tree,
        encoding: "utf8",
      },
    );
    expect(applied.stdout + applied.stderr).not.toMatch(/FAILED|fuzz|offset|reversed/i);
    expect(applied.status).toBe(0);
    const source = readFileSync(join(tree, path), "utf8");
    expect(source).toMatch(/alignas\(64\) static const tile_config_t ggml_amx_tile_config = \{/);
    expect(source).toContain("_tile_loadconfig(&ggml_amx_tile_config);");
    expect(source).not.toContain("tile_config_t tc");
  });

  it("applies to the bundled llama.cpp, hunk by hunk, and copies only the source stream's used cells", () => {
    const paths = ["src/llama-kv-cache.cpp", "src/llama-kv-cache.h"];
    const tree = join(work, "llama.cpp-stream-copy");
    mkdirSync(tree);
    checkoutBundledLlamaCpp(tree, paths);
    // Before: a cross-stream copy moves each layer's whole stream.
    expect(readFileSync(join(tree, paths[0] as string), "utf8")).toMatch(
      /ggml_backend_tensor_copy\(layer\.k_stream\[ssrc\], layer\.k_stream\[sdst\]\);/,
    );
    const applied = spawnSync("patch", ["-p1", "--forward", "--batch", "-i", LLAMA_CPP_PATCHES.streamCopy], {
      cwd: tree,
      encoding: "utf8",
    });
    expect(applied.stdout + applied.stderr).not.toMatch(/FAILED|fuzz|offset|reversed/i);
    expect(applied.status).toBe(0);
    const source = readFileSync(join(tree, paths[0] as string), "utf8");
    // The rows are the source's used cells when the copy is enqueued, and both K and V go through the row copy.
    expect(source).toMatch(
      /sc_info\.sdst\.push_back\(s1\);\s*sc_info\.rows\.push_back\(v_cells\[s0\]\.used_max_p1\(\)\);/,
    );
    expect(source).toContain("hearth_copy_stream_rows(layer.k_stream[ssrc], layer.k_stream[sdst], rows);");
    expect(source).toContain(
      "hearth_copy_stream_rows(layer.v_stream[ssrc], layer.v_stream[sdst], v_trans ? get_size() : rows);",
    );
    expect(source).not.toMatch(/ggml_backend_tensor_copy\(layer\./);
    expect(readFileSync(join(tree, paths[1] as string), "utf8")).toContain("std::vector<uint32_t> rows;");
  });

  it("applies to the bundled llama.cpp, hunk by hunk, and multiplies Q4_1 weights two rows at a time on x86", () => {
    const paths = ["ggml/src/ggml-cpu/ggml-cpu.c", "ggml/src/ggml-cpu/arch/x86/quants.c"];
    const tree = join(work, "llama.cpp-q4-1-pairs");
    mkdirSync(tree);
    checkoutBundledLlamaCpp(tree, paths);
    // Before: one row by one column per call on x86 (two only with Arm's int8 matrix multiply).
    expect(readFileSync(join(tree, paths[1] as string), "utf8")).not.toContain(
      "ggml_vec_dot_q4_1_q8_1_rows2",
    );
    const applied = spawnSync("patch", ["-p1", "--forward", "--batch", "-i", LLAMA_CPP_PATCHES.q4_1Pairs], {
      cwd: tree,
      encoding: "utf8",
    });
    expect(applied.stdout + applied.stderr).not.toMatch(/FAILED|fuzz|offset|reversed/i);
    expect(applied.status).toBe(0);
    const cpu = readFileSync(join(tree, paths[0] as string), "utf8");
    expect(cpu).toMatch(
      /ggml_vec_dot_q4_1_q8_1,\s*\.vec_dot_type\s*= GGML_TYPE_Q8_1,\s*#if defined \(__ARM_FEATURE_MATMUL_INT8\) \|\| \(defined\(__AVX2__\)/,
    );
    expect(cpu).toContain("const bool single_column_pairs = ggml_vec_dot_single_column_pairs(type);");
    expect(cpu).toContain("for (int cn = 0; cn < ncols; ++cn) {");
    // One token's product keeps the one-row kernel (two rows by one column slowed a one-stream decode).
    expect(cpu).toContain("(ne11 == 1 && ggml_vec_dot_single_column_pairs(src0->type))");
    const kernel = readFileSync(join(tree, paths[1] as string), "utf8");
    expect(kernel).toMatch(/if \(nrc == 2\) \{\s*ggml_vec_dot_q4_1_q8_1_rows2\(nb, s, bs, vx, bx, vy, by\);/);
  });
});
