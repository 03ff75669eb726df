// The Python clients of the Responses API, unmodified, against Hearth: openai-python's `responses.create`, `.stream`
// and `.parse` and a stored response's life, and the OpenAI Agents SDK running a function tool with its default
// (Responses) model. Each script runs once in the venv of scripts/setup-clients.sh, one after the other, and the
// server's request log shows which endpoint each one called.
import { beforeAll, describe, expect, it } from "vitest";
import { type PythonChecks, runPythonChecks } from "./python.js";
import { logMark, routes, type ServedRequest, servedSince } from "./request-log.js";

const SCRIPT_TIMEOUT_MS = 170_000;

interface Summary {
  id: string;
  status: string;
  incomplete_reason: string | null;
  output_types: string[];
  output_text: string;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
}

function expectSummary(summary: Summary): void {
  expect(summary.id).toMatch(/^resp_/);
  expect(["completed", "incomplete"]).toContain(summary.status);
  if (summary.status === "incomplete") expect(summary.incomplete_reason).toBe("max_output_tokens");
  expect(summary.input_tokens).toBeGreaterThan(0);
  expect(summary.output_tokens).toBeGreaterThan(0);
  expect(summary.total_tokens).toBe(summary.input_tokens + summary.output_tokens);
  expect(summary.cached_tokens).toBeGreaterThanOrEqual(0);
  expect(summary.reasoning_tokens).toBeGreaterThanOrEqual(0);
}

function expectText(summary: Summary): void {
  expectSummary(summary);
  expect(summary.output_types).toEqual(["message"]);
  expect(summary.output_text.length).toBeGreaterThan(0);
}

/** A script run with the requests it made, from the server's log. */
function scriptRun(script: string): () => { checks: PythonChecks; served: ServedRequest[] } {
  let run: { checks: PythonChecks; served: ServedRequest[] } | undefined;
  beforeAll(async () => {
    const mark = await logMark();
    const checks = await runPythonChecks(script);
    run = { checks, served: await servedSince(mark) };
  }, SCRIPT_TIMEOUT_MS);
  return () => {
    if (run === undefined) throw new Error(`${script} did not run`);
    return run;
  };
}

describe("openai-python responses", () => {
  const run = scriptRun("openai_python_responses.py");

  it("responses.create with a string input and instructions: text, usage, instructions echoed", () => {
    const result = run().checks.value<Summary & { instructions: string }>("create_string");
    expectText(result);
    expect(result.instructions).toBe("You are a helpful assistant. Answer in one short sentence.");
  });

  it("responses.create with items (developer, user, assistant; string and part contents): text", () => {
    expectText(run().checks.value<Summary>("create_items"));
  });

  it("responses.stream with a function tool, then its output by previous_response_id: the call, then the answer", () => {
    const result = run().checks.value<{
      event_types: string[];
      sequence_numbers: number[];
      first: Summary;
      call_name: string;
      city_type: string;
      answer: Summary;
      answer_previous_response_id: string;
      first_id: string;
      streamed_text: string;
    }>("stream_tool_round_trip");
    expectSummary(result.first);
    expect(result.first.output_types).toContain("function_call");
    expect(result.call_name).toBe("get_weather");
    expect(result.city_type).toBe("str");
    expect(result.event_types[0]).toBe("response.created");
    expect(result.event_types).toContain("response.function_call_arguments.delta");
    expect(result.event_types).toContain("response.function_call_arguments.done");
    expect(result.event_types.at(-1)).toBe("response.completed");
    expect(result.sequence_numbers).toEqual(result.sequence_numbers.map((_, index) => index));
    expectText(result.answer);
    expect(result.answer_previous_response_id).toBe(result.first_id);
    expect(result.streamed_text).toBe(result.answer.output_text);
  });

  it("responses.parse with a pydantic model: Field(ge=1, le=10) and a datetime parsed", () => {
    const meeting = run().checks.value("parse");
    expect(meeting.priority_type).toBe("int");
    expect(meeting.priority).toBeGreaterThanOrEqual(1);
    expect(meeting.priority).toBeLessThanOrEqual(10);
    expect(meeting.starts_at_type).toBe("datetime");
    expect(meeting.title_type).toBe("str");
  });

  it("a stored response: retrieve, input_items.list (paged by 1), delete, then a 404", () => {
    expect(run().checks.value("stored")).toEqual({
      same_id: true,
      same_output: true,
      input_texts: ["Remember the word papaya.", "Say OK."],
      after_delete: 404,
    });
  });

  it("every request went to the Responses API", () => {
    for (const route of routes(run().served))
      expect(route).toMatch(/^(POST|GET|DELETE) \/v1\/responses(\/|$)/);
  });
});

describe("OpenAI Agents SDK (openai-agents, default model: Responses API)", () => {
  const run = scriptRun("openai_agents_sdk.py");

  interface AgentRun {
    model_class: string;
    calls: { city: string; city_type: string }[];
    items: string[];
    model_responses: number;
    response_ids: string[];
    final_output: string;
    input_tokens: number;
    output_tokens: number;
    text_deltas?: number;
  }

  function expectToolRun(result: AgentRun): void {
    expect(result.model_class).toBe("OpenAIResponsesModel");
    expect(result.calls).toHaveLength(1);
    expect(result.calls[0]?.city_type).toBe("str");
    expect(result.items).toEqual(["tool_call_item", "tool_call_output_item", "message_output_item"]);
    expect(result.model_responses).toBe(2);
    for (const id of result.response_ids) expect(id).toMatch(/^resp_/);
    expect(typeof result.final_output).toBe("string");
    expect(result.final_output.length).toBeGreaterThan(0);
    expect(result.input_tokens).toBeGreaterThan(0);
    expect(result.output_tokens).toBeGreaterThan(0);
  }

  it("Runner.run_sync: the agent calls its function tool, gets the result and finishes its turn in text", () => {
    expectToolRun(run().checks.value<AgentRun>("tool_run"));
  });

  it("Runner.run_streamed: the same run streamed, the answer's text deltas received", () => {
    const result = run().checks.value<AgentRun>("streamed_tool_run");
    expectToolRun(result);
    expect(result.text_deltas).toBeGreaterThan(0);
  });

  it("both runs went to POST /v1/responses only: two model calls each, nothing else (no tracing export)", () => {
    const { served } = run();
    expect(routes(served)).toEqual(Array(4).fill("POST /v1/responses"));
    for (const request of served) expect(request.status).toBe(200);
  });
});
