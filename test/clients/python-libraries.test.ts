// The Python client libraries, unmodified, against Hearth: each library's script (test/clients/python) runs once in
// the venv of scripts/setup-clients.sh, and each of its checks is asserted here on what the library returned.
import { beforeAll, describe, expect, it } from "vitest";
import { type PythonChecks, runPythonChecks } from "./python.js";

const SCRIPT_TIMEOUT_MS = 170_000;

/**
 * A script's checks, run once for the describe's tests. Every script starts as the file is collected, so they run
 * side by side (most of their time is Python importing the libraries); each describe awaits its own before its tests.
 */
function checksOf(script: string): () => PythonChecks {
  const running = runPythonChecks(script);
  // A failure is reported by the beforeAll that awaits it, not as an unhandled rejection before then.
  running.catch(() => {});
  let checks: PythonChecks | undefined;
  beforeAll(async () => {
    checks = await running;
  }, SCRIPT_TIMEOUT_MS);
  return () => {
    if (checks === undefined) throw new Error(`${script} did not run`);
    return checks;
  };
}

function expectText(text: unknown): void {
  expect(typeof text).toBe("string");
  expect((text as string).length).toBeGreaterThan(0);
}

/** An integer the library parsed (a Python int, not a float or a string) within [min, max]. */
function expectInt(value: unknown, type: unknown, min: number, max: number): void {
  expect(type).toBe("int");
  expect(Number.isInteger(value)).toBe(true);
  expect(value).toBeGreaterThanOrEqual(min);
  expect(value).toBeLessThanOrEqual(max);
}

describe("openai-python", () => {
  const checks = checksOf("openai_python.py");

  it("the pydantic model's schema carries the bounds and the date-time format", () => {
    const schema = checks().value<{ properties: Record<string, unknown> }>("schema");
    expect(schema.properties.priority).toMatchObject({ type: "integer", minimum: 1, maximum: 10 });
    expect(schema.properties.starts_at).toMatchObject({ type: "string", format: "date-time" });
  });

  it("chat.completions.create: text and a finish reason", () => {
    const { content, finish_reason } = checks().value("chat");
    expectText(content);
    expect(["stop", "length"]).toContain(finish_reason);
  });

  it("a streamed create: text and usage", () => {
    const { text, completion_tokens } = checks().value("stream");
    expectText(text);
    expect(completion_tokens).toBeGreaterThan(0);
  });

  for (const check of ["parse", "beta_parse"]) {
    it(`${check === "parse" ? "chat" : "beta.chat"}.completions.parse: Field(ge=1, le=10) and a datetime parsed`, () => {
      const meeting = checks().value(check);
      expectInt(meeting.priority, meeting.priority_type, 1, 10);
      expect(meeting.starts_at_type).toBe("datetime");
      expect(meeting.title_type).toBe("str");
    });
  }

  it("a strict pydantic_function_tool, named: parsed arguments within the bounds", () => {
    const call = checks().value("strict_tool");
    expect(call.name).toBe("GetForecast");
    expectInt(call.days, call.days_type, 1, 7);
    expect(call.city_type).toBe("str");
  });

  it("a non-strict tool whose schema has bounds, tool_choice required: valid arguments", () => {
    const call = checks().value("non_strict_tool");
    expect(call.name).toBe("get_forecast");
    expectInt(call.days, call.days_type, 1, 7);
  });

  it("tool_choice allowed_tools (mode required, one of two tools): only the allowed tool is called", () => {
    const { names, city_type } = checks().value<{ names: string[]; city_type: string }>("allowed_tools");
    expect(names.length).toBeGreaterThan(0);
    expect(new Set(names)).toEqual(new Set(["get_time"]));
    expect(city_type).toBe("str");
  });

  it("the SDK's newer fields (verbosity, reasoning_effort none, prompt_cache_key/retention, safety_identifier, store)", () => {
    expectText(checks().value("sdk_fields").content);
  });

  it("stream_options.include_obfuscation: a normal stream", () => {
    expectText(checks().value("stream_include_obfuscation").text);
  });

  it("extra_body top_k, min_p, repetition_penalty (vLLM's sampling extensions): a normal answer", () => {
    expectText(checks().value("sampling_extensions").content);
  });
});

describe("LangChain (langchain-openai ChatOpenAI)", () => {
  const checks = checksOf("langchain_python.py");

  it("invoke: text and token usage", () => {
    const { content, output_tokens } = checks().value("invoke");
    expectText(content);
    expect(output_tokens).toBeGreaterThan(0);
  });

  it("stream: chunks that add up to text", () => {
    const { chunks, text } = checks().value("stream");
    expect(chunks).toBeGreaterThan(1);
    expectText(text);
  });

  it("with_structured_output(pydantic model), default method (json_schema): bounds respected", () => {
    const movie = checks().value("structured_output");
    expectInt(movie.rating, movie.rating_type, 1, 10);
    expect(movie.year_type).toBe("int");
  });

  it("with_structured_output(pydantic model, function_calling): bounds respected", () => {
    const movie = checks().value("structured_output_function_calling");
    expectInt(movie.rating, movie.rating_type, 1, 10);
    expect(movie.year_type).toBe("int");
  });

  it("bind_tools with a named tool_choice: a valid integer argument, the tool run on it", () => {
    const call = checks().value("tool_call");
    expect(call.name).toBe("get_forecast");
    expectInt(call.days, call.days_type, 1, 7);
    expect(call.tool_result).toContain(`for ${call.days} days`);
  });

  it("reasoning_effort='low' (as apps set it): a normal answer", () => {
    expectText(checks().value("reasoning_effort").content);
  });
});

describe("instructor", () => {
  const checks = checksOf("instructor_client.py");

  for (const mode of ["tools", "tools_strict", "json_schema"]) {
    it(`from_openai, Mode.${mode.toUpperCase()}: a response_model with Field(ge=1, le=5) validated`, () => {
      const rating = checks().value(mode);
      expectInt(rating.stars, rating.stars_type, 1, 5);
      expect(rating.recommended_type).toBe("bool");
    });
  }
});

describe("pydantic-ai (OpenAIChatModel, OpenAIProvider)", () => {
  const checks = checksOf("pydantic_ai_agent.py");

  it("a text run", () => {
    expectText(checks().value("text").output);
  });

  for (const [check, how] of [
    ["tool_output", "as its output tool"],
    ["native_output", "as NativeOutput (json_schema)"],
  ] as const) {
    it(`a structured output_type with bounds, ${how}`, () => {
      const city = checks().value(check);
      expectInt(city.rating, city.rating_type, 1, 5);
      expectInt(city.population_millions, city.population_type, 0, 100);
    });
  }

  it("a function tool with an integer parameter called first, then the structured output", () => {
    const run = checks().value<
      { calls: { year: unknown; year_type: unknown }[]; requests: number } & Record<string, unknown>
    >("function_tool");
    expect(run.calls.length).toBe(1);
    expect(run.calls[0]?.year_type).toBe("int");
    expect(run.requests).toBe(2);
    expectInt(run.rating, run.rating_type, 1, 5);
  });
});

describe("LiteLLM (openai/ provider with api_base)", () => {
  const checks = checksOf("litellm_client.py");

  it("completion: text and a finish reason", () => {
    const { content, finish_reason } = checks().value("completion");
    expectText(content);
    expect(["stop", "length"]).toContain(finish_reason);
  });

  it("completion(stream=True): chunks that add up to text", () => {
    const { chunks, text } = checks().value("stream");
    expect(chunks).toBeGreaterThan(1);
    expectText(text);
  });

  it("response_format=pydantic model with bounds: valid JSON within them", () => {
    const rating = checks().value("response_format");
    expectInt(rating.stars, rating.stars_type, 1, 5);
  });

  it("a named tool with integer bounds: valid arguments", () => {
    const call = checks().value("tool_call");
    expect(call.name).toBe("get_forecast");
    expectInt(call.days, call.days_type, 1, 7);
  });
});
