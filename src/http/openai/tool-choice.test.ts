// tool_choice in every form OpenAI's chat API has, and the 400s that list them.
import { describe, expect, it } from "vitest";
import { apiErrorOf } from "../../../test/support/api-errors.js";
import { parseChatRequest } from "./chat-request.js";
import { TOOL_CHOICE_FORMS } from "./chat-request-output.js";

const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
const parse = (fields: Record<string, unknown>) => parseChatRequest({ ...base, ...fields }, { maxN: 8 });
const fn = (name: string) => ({ type: "function", function: { name, parameters: { type: "object" } } });
const tools = [fn("get_weather"), fn("get_time"), fn("send_mail")];
const allowed = (mode: string, ...names: string[]) => ({
  type: "allowed_tools",
  allowed_tools: { mode, tools: names.map((name) => ({ type: "function", function: { name } })) },
});

const rejection = (fields: Record<string, unknown>) => apiErrorOf(() => parse(fields));

describe("tool_choice: accepted forms", () => {
  it.each(["none", "auto", "required"])("%s", (choice) => {
    expect(parse({ tools, tool_choice: choice }).output?.toolChoice).toBe(choice);
  });

  it("a named function", () => {
    const choice = { type: "function", function: { name: "get_time" } };
    expect(parse({ tools, tool_choice: choice }).output?.toolChoice).toEqual({ name: "get_time" });
  });

  it.each(["auto", "required"])(
    "allowed_tools in mode %s: the listed names, once each; every tool stays in the request",
    (mode) => {
      const output = parse({
        tools,
        tool_choice: allowed(mode, "get_time", "get_weather", "get_time"),
      }).output;
      expect(output?.toolChoice).toEqual({ allowed: ["get_time", "get_weather"], mode });
      expect(output?.tools.map((tool) => tool.name)).toEqual(["get_weather", "get_time", "send_mail"]);
    },
  );
});

describe("tool_choice: 400s", () => {
  it.each<[string, unknown]>([
    ["an unknown string", "always"],
    ["a number", 3],
    ["an object of an unknown type", { type: "tool", name: "get_time" }],
    ["an array", ["auto"]],
  ])("%s lists every accepted form", (_, choice) => {
    const error = rejection({ tools, tool_choice: choice });
    expect(error.status).toBe(400);
    expect(error.param).toBe("tool_choice");
    expect(error.message).toBe(
      `Invalid value for 'tool_choice': ${JSON.stringify(choice)}. Supported values are: ${TOOL_CHOICE_FORMS}.`,
    );
    for (const form of ["'none'", "'auto'", "'required'", '"type": "function"', '"type": "allowed_tools"']) {
      expect(error.message).toContain(form);
    }
  });

  it.each<[string, unknown, string, RegExp]>([
    [
      "an allowed tool not in tools",
      allowed("auto", "get_time", "nope"),
      "tool_choice.allowed_tools.tools[1].function.name",
      /no function named 'nope'/,
    ],
    [
      "an allowed_tools mode none",
      allowed("none", "get_time"),
      "tool_choice.allowed_tools.mode",
      /'auto' and 'required'/,
    ],
    ["an empty allowed list", allowed("auto"), "tool_choice.allowed_tools.tools", /at least 1 element/],
    [
      "allowed_tools without its object",
      { type: "allowed_tools" },
      "tool_choice.allowed_tools",
      /Missing required parameter: 'tool_choice.allowed_tools'/,
    ],
    [
      "a named function without a name",
      { type: "function", function: {} },
      "tool_choice.function.name",
      /Missing required/,
    ],
    [
      "a custom tool choice",
      { type: "custom", custom: { name: "grep" } },
      "tool_choice",
      /Custom tools \(type 'custom'\) are not supported/,
    ],
  ])("%s", (_, choice, param, message) => {
    const error = rejection({ tools, tool_choice: choice });
    expect(error.param).toBe(param);
    expect(error.message).toMatch(message);
  });

  it("refuses a custom tool in tools by name", () => {
    const error = rejection({ tools: [{ type: "custom", custom: { name: "grep", description: "search" } }] });
    expect(error.param).toBe("tools[0].type");
    expect(error.message).toMatch(
      /Custom tools \(type 'custom'\) are not supported: Hearth calls functions only/,
    );
  });
});
