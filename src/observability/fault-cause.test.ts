import { describe, expect, it } from "vitest";
import { faultCause } from "./fault-cause.js";

describe("faultCause", () => {
  it("takes the error's code, or its cause's, and a message; never the stack", () => {
    const reset = Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" });
    expect(faultCause(reset)).toEqual({ code: "UND_ERR_SOCKET", cause: "other side closed" });
    const wrapped = new Error("fetch failed", {
      cause: Object.assign(new Error("x"), { code: "ECONNREFUSED" }),
    });
    expect(faultCause(wrapped, "connection refused")).toEqual({
      code: "ECONNREFUSED",
      cause: "connection refused",
    });
    expect(faultCause(new Error("plain"))).toEqual({ cause: "plain" });
    expect(faultCause("a string")).toEqual({ cause: "a string" });
    expect(JSON.stringify(faultCause(reset))).not.toContain("at ");
  });
});
