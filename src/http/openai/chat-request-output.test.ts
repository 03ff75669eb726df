import { describe, expect, it } from "vitest";
import { apiErrorOf } from "../../../test/support/api-errors.js";
import { compileJsonSchema } from "../../chat/schema/compiled-schema.js";
import { parseChatRequest } from "./chat-request.js";

const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
const parse = (fields: Record<string, unknown>) => parseChatRequest({ ...base, ...fields }, { maxN: 8 });
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

const rejection = (fields: Record<string, unknown>) => apiErrorOf(() => parse(fields));

describe("parseChatRequest: response_format", () => {
  it("json_object and json_schema become an output request", () => {
    expect(parse({ response_format: { type: "json_object" } }).output).toEqual({
      format: { type: "json_object" },
      tools: [],
      toolChoice: "auto",
      parallelToolCalls: true,
    });
    const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
    expect(
      parse({ response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: true } } })
        .output?.format,
    ).toEqual({ type: "json_schema", name: "x", schema, compiled: compileJsonSchema(schema) });
  });

  it("strict: names the first keyword it cannot enforce with its place in the schema", () => {
    const schema = { type: "object", properties: { n: { type: "number", minimum: 1, not: { const: 2 } } } };
    const error = rejection({
      response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: true } },
    });
    expect(error.status).toBe(400);
    expect(error.param).toBe("response_format.json_schema.schema");
    expect(error.message).toMatch(/'not' is not supported.*#\/properties\/n/);
    // Not strict, the schema is a hint: accepted, `minimum` enforced, `not` left out.
    const hint = parse({ response_format: { type: "json_schema", json_schema: { name: "x", schema } } });
    expect(hint.output?.format.type).toBe("json_schema");
  });

  it("tool parameters whose root is a reference to an object definition are an object", () => {
    const parameters = {
      $ref: "#/$defs/Args",
      $defs: {
        Args: { type: "object", properties: { n: { type: "integer", minimum: 1 } }, required: ["n"] },
      },
    };
    const parsed = parse({ tools: [{ type: "function", function: { name: "f", parameters } }] });
    expect(parsed.output?.tools[0]?.compiledParameters.minimal).toBe('{"n":1}');
  });

  it("any schema that is not valid JSON Schema is a 400 naming the place, strict or not", () => {
    for (const strict of [true, false]) {
      const error = rejection({
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "object", properties: { n: { minimum: "a" } } }, strict },
        },
      });
      expect(error.status).toBe(400);
      expect(error.param).toBe("response_format.json_schema.schema");
      expect(error.message).toMatch(/#\/properties\/n\/minimum/);
    }
  });
});

describe("parseChatRequest: tools", () => {
  it("takes tools, tool_choice and parallel_tool_calls", () => {
    const parsed = parse({ tools: [weather], tool_choice: "required", parallel_tool_calls: false });
    expect(parsed.output).toEqual({
      format: { type: "text" },
      tools: [
        {
          name: "get_weather",
          description: "Weather for a city",
          parameters: weather.function.parameters,
          compiledParameters: compileJsonSchema(weather.function.parameters, { strict: false }),
        },
      ],
      toolChoice: "required",
      parallelToolCalls: false,
    });
    expect(
      parse({ tools: [weather], tool_choice: { type: "function", function: { name: "get_weather" } } }).output
        ?.toolChoice,
    ).toEqual({
      name: "get_weather",
    });
    expect(parse({ tools: [weather] }).output?.toolChoice).toBe("auto");
  });

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    [
      "an unknown named tool",
      { tools: [weather], tool_choice: { type: "function", function: { name: "nope" } } },
      "tool_choice.function.name",
      /no function named 'nope'/,
    ],
    ["a bad tool_choice string", { tools: [weather], tool_choice: "always" }, "tool_choice", /Invalid value/],
    [
      "a non-function tool",
      { tools: [{ type: "code", function: { name: "f" } }] },
      "tools[0].type",
      /Invalid value/,
    ],
    [
      "a bad function name",
      { tools: [{ type: "function", function: { name: "a b" } }] },
      "tools[0].function.name",
      /Function names/,
    ],
    ["duplicate names", { tools: [weather, weather] }, "tools[1].function.name", /Duplicate function name/],
    [
      "a strict tool's parameters keyword it cannot enforce",
      {
        tools: [
          {
            type: "function",
            function: { name: "f", strict: true, parameters: { type: "object", patternProperties: {} } },
          },
        ],
      },
      "tools[0].function.parameters",
      /'patternProperties' is not supported/,
    ],
    [
      "parameters that are not an object",
      { tools: [{ type: "function", function: { name: "f", parameters: { type: "string" } } }] },
      "tools[0].function.parameters",
      /must describe an object/,
    ],
  ])("rejects %s", (_, fields, param, message) => {
    const error = rejection(fields);
    expect(error.status).toBe(400);
    expect(error.param).toBe(param);
    expect(error.message).toMatch(message);
  });

  it("takes assistant tool_calls and tool results for the round trip; reasoning fields are accepted", () => {
    const parsed = parseChatRequest(
      {
        model: "m",
        messages: [
          { role: "user", content: "Weather in Paris?" },
          {
            role: "assistant",
            content: null,
            reasoning_content: "I should call the tool",
            tool_calls: [
              {
                id: "call_1",
                type: "function",
                function: { name: "get_weather", arguments: '{"city":"Paris"}' },
              },
            ],
          },
          { role: "tool", tool_call_id: "call_1", content: "sunny" },
        ],
      },
      { maxN: 8 },
    );
    expect(parsed.messages[1]).toEqual({
      role: "assistant",
      content: "",
      toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
    });
    expect(parsed.messages[2]).toEqual({ role: "tool", content: "sunny", toolCallId: "call_1" });
  });
});
