// The Open Responses compliance checks against Hearth (test/clients/python/open_responses_compliance.py: the
// specification's test templates, every body and SSE event validated against its schema from the openresponses-types
// package). One test per check of the suite, named by its id; the image and file inputs must be clear 400s on a
// text-only model, and so must the suite's optional built-in tool checks.
import { beforeAll, describe, expect, it } from "vitest";
import { type PythonChecks, runPythonChecks } from "./python.js";

interface CheckResult {
  http_status: number;
  schema_errors?: string[];
  status?: string | null;
  output_types?: string[];
  event_types?: string[];
  item_types?: Record<string, string[]>;
  sequence_numbers?: number[];
  error?: { message: string; type: string; param: string | null; code: string | null };
  first?: { schema_errors: string[]; status: string; output_types: string[] };
}

let checks: PythonChecks;

beforeAll(async () => {
  checks = await runPythonChecks("open_responses_compliance.py");
}, 170_000);

function check(id: string): CheckResult {
  return checks.value<CheckResult>(id);
}

/** The suite's validators: a 200, no schema error, a completed response with output. */
function expectCompliant(result: CheckResult): void {
  expect(result.error).toBeUndefined();
  expect(result.http_status).toBe(200);
  expect(result.schema_errors).toEqual([]);
  expect(result.status).toBe("completed");
  expect(result.output_types?.length).toBeGreaterThan(0);
}

function expectStream(result: CheckResult): void {
  expectCompliant(result);
  const types = result.event_types ?? [];
  expect(types[0]).toBe("response.created");
  expect(types.at(-1)).toBe("response.completed");
  expect(result.sequence_numbers).toEqual(types.map((_, index) => index));
}

/** An OpenAI-shaped 400 whose param names the refused part of the request. */
function expectRefused(result: CheckResult, param: RegExp, message: RegExp): void {
  expect(result.http_status).toBe(400);
  expect(result.error?.type).toBe("invalid_request_error");
  expect(result.error?.param).toMatch(param);
  expect(result.error?.message).toMatch(message);
}

describe("Open Responses compliance", () => {
  it("the schema package knows the specification's streaming events", () => {
    expect(checks.value<string[]>("event_types_known")).toEqual(
      expect.arrayContaining([
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
        "error",
      ]),
    );
  });

  it("basic-response: a message in, a ResponseResource out", () => {
    expectCompliant(check("basic-response"));
  });

  it("streaming-response: every SSE event valid, ending in response.completed", () => {
    const result = check("streaming-response");
    expectStream(result);
    expect(result.event_types).toContain("response.output_text.delta");
  });

  it("system-prompt: a system message in the input", () => {
    expectCompliant(check("system-prompt"));
  });

  it("tool-calling (tool_choice required: a 135M model does not choose a tool itself): a function_call output item", () => {
    const result = check("tool-calling");
    expect(result.http_status).toBe(200);
    expect(result.schema_errors).toEqual([]);
    expect(result.output_types).toContain("function_call");
  });

  it("tool-calling-streaming (tool_choice required): output_item.added/done of a function_call and its arguments delta/done", () => {
    const result = check("tool-calling-streaming");
    expect(result.http_status).toBe(200);
    expect(result.schema_errors).toEqual([]);
    expect(result.item_types?.["response.output_item.added"]).toContain("function_call");
    expect(result.item_types?.["response.output_item.done"]).toContain("function_call");
    expect(result.event_types).toContain("response.function_call_arguments.delta");
    expect(result.event_types).toContain("response.function_call_arguments.done");
  });

  it("function-call-roundtrip: the call's output sent back by previous_response_id, then a completed answer", () => {
    const result = check("function-call-roundtrip");
    expect(result.first?.schema_errors).toEqual([]);
    expect(result.first?.output_types).toContain("function_call");
    expectCompliant(result);
  });

  it("image-input: a clear 400 naming the image part on a text-only model (SmolLM2 reads no images)", () => {
    expectRefused(check("image-input"), /^input\[0\]\.content\[1\]/, /image/i);
  });

  it("file-input: a clear 400 naming the file part on a text-only model", () => {
    expectRefused(check("file-input"), /^input\[0\]\.content\[1\]/, /file/i);
  });

  it("multi-turn: user, assistant, user messages", () => {
    expectCompliant(check("multi-turn"));
  });

  it("previous-response-id: the second turn continues the first", () => {
    const result = check("previous-response-id");
    expect(result.first?.schema_errors).toEqual([]);
    expectCompliant(result);
  });

  it("file-search (optional in the suite): a 400 naming the tool, Hearth runs no built-in tool", () => {
    expectRefused(check("file-search"), /^tools\[0\]/, /file_search/);
  });

  it("offline-web-search (optional in the suite): a 400 naming the tool, Hearth runs no built-in tool", () => {
    expectRefused(check("offline-web-search"), /^tools\[0\]/, /web_search/);
  });
});
