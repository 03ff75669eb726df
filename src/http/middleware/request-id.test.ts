// The request log line keeps routes and ids but never a token carried in a path (an invitation link).
import { describe, expect, it } from "vitest";
import { loggedPath } from "./request-id.js";

describe("loggedPath", () => {
  it("redacts token-like segments and keeps the rest", () => {
    const token = "J7PO2i8ewmf9y2nyYg2QCYtA7SAHsT9w08kKJsLu9r2";
    expect(loggedPath(`/dashboard/join/${token}/accept`)).toBe("/dashboard/join/[redacted]/accept");
    expect(loggedPath("/dashboard/keys/key_5kENcDEXxjT0IOVrDxT7kR/revoke")).toBe(
      "/dashboard/keys/key_5kENcDEXxjT0IOVrDxT7kR/revoke",
    );
    expect(loggedPath("/v1/chat/completions")).toBe("/v1/chat/completions");
  });
});
