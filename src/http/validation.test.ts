// The shared body reader and validator as /admin/v1 uses them: empty bodies, query strings and custom sentences.
// (Every /v1 rule and its message is in src/http/openai/chat-request.test.ts.)
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { InvalidRequestError } from "./errors/api-error.js";
import { parseJsonBody, validate } from "./validation.js";

function refusal(run: () => unknown): InvalidRequestError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestError);
    return err as InvalidRequestError;
  }
  throw new Error("expected a 400");
}

describe("parseJsonBody", () => {
  it("reads an empty body as the caller says, or refuses it", () => {
    expect(parseJsonBody(" \n", { emptyBody: {} })).toEqual({});
    expect(refusal(() => parseJsonBody("")).message).toMatch(/^We could not parse the JSON body/);
    expect(refusal(() => parseJsonBody("{not json", { emptyBody: {} })).param).toBeNull();
  });
});

describe("validate", () => {
  const query = z.strictObject({
    limit: z.coerce.number().int().min(1).optional(),
    by: z.enum(["day"]).optional(),
  });
  const body = z.strictObject({
    name: z.string().min(1),
    password: z.string().min(8).optional(),
    when: z
      .string()
      .refine((v) => v === "now", { message: "Invalid value for 'when': only 'now' is accepted." })
      .optional(),
  });

  it("returns the parsed value", () => {
    expect(validate({ limit: "5" }, query)).toEqual({ limit: 5 });
  });

  it.each<[string, unknown, z.ZodType, string | null, string]>([
    ["a missing field", {}, body, "name", "Missing required parameter: 'name'."],
    [
      "a wrong type",
      { name: 5 },
      body,
      "name",
      "Invalid type for 'name': expected a string, but got an integer instead.",
    ],
    [
      "an unknown field",
      { name: "x", extra: 1 },
      body,
      "extra",
      "Unrecognized request argument supplied: extra",
    ],
    [
      "a short string",
      { name: "x", password: "short" },
      body,
      "password",
      "Invalid 'password': expected a string with at least 8 character(s), but got 5 instead.",
    ],
    [
      "a custom check, in its own words",
      { name: "x", when: "later" },
      body,
      "when",
      "Invalid value for 'when': only 'now' is accepted.",
    ],
    [
      "query text that is no number",
      { limit: "abc" },
      query,
      "limit",
      "Invalid value for 'limit': expected a number, but got 'abc' instead.",
    ],
    [
      "a query value out of range",
      { limit: "0" },
      query,
      "limit",
      "Invalid 'limit': expected a value >= 1, but got '0' instead.",
    ],
    [
      "a value not in the enum",
      { by: "week" },
      query,
      "by",
      "Invalid value for 'by': 'week'. Supported values are: 'day'.",
    ],
    [
      "a body that is not an object",
      [1],
      body,
      null,
      "Invalid type for 'body': expected an object, but got an array instead.",
    ],
  ])("refuses %s with its param", (_, raw, schema, param, message) => {
    const err = refusal(() => validate(raw, schema));
    expect(err.param).toBe(param);
    expect(err.message).toBe(message);
  });
});
