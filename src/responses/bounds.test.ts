// The input bounds the endpoint checks before any work: items per request and JSON bytes per stored response.
import { describe, expect, it } from "vitest";
import { inputBoundExceeded } from "./bounds.js";

const limits = { maxInputItems: 3, maxStoredBytes: 40 };

describe("inputBoundExceeded", () => {
  it("lets through an input within both bounds, a string as well as items", () => {
    expect(inputBoundExceeded([{ type: "message" }, { type: "message" }], limits)).toBeUndefined();
    expect(inputBoundExceeded("x".repeat(38), limits)).toBeUndefined(); // 40 bytes with its quotes
  });

  it("names input and the bound: too many items, then too many bytes (UTF-8)", () => {
    expect(inputBoundExceeded([1, 2, 3, 4], limits)).toEqual({
      param: "input",
      bound: "maxInputItems",
      message: "Invalid 'input': expected an array with at most 3 element(s), but got 4 instead.",
    });
    const over = inputBoundExceeded("\u00e9".repeat(20), limits); // 40 bytes of text + 2 quotes
    expect(over).toMatchObject({ param: "input", bound: "maxStoredBytes" });
    expect(over?.message).toMatch(/42 bytes; at most 40 bytes/);
  });
});
