import { describe, expect, it } from "vitest";
import { autoPassesOver } from "./backend.js";

const XEON = ["avx512f", "avx512_vnni", "amx_bf16", "amx_tile", "amx_int8"];
const EPYC = ["avx2", "fma", "avx512f", "avx512_vnni"];

describe("autoPassesOver", () => {
  it("passes over the tuned build under auto on a CPU with AMX, saying why", () => {
    expect(autoPassesOver({ build: "auto", threadPoolPoll: undefined }, XEON)).toMatch(
      /this CPU has AMX, which the tuned build leaves out .*\(engine\.build: tuned takes the tuned build anyway/,
    );
  });

  it("takes it under auto on a CPU without AMX, and under tuned on any CPU", () => {
    expect(autoPassesOver({ build: "auto", threadPoolPoll: undefined }, EPYC)).toBeUndefined();
    expect(autoPassesOver({ build: "tuned", threadPoolPoll: undefined }, XEON)).toBeUndefined();
  });
});
