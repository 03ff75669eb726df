// tool_choice in the output plan: every tool stays in the prompt, the grammar lets only the chosen ones be called.
import { describe, expect, it } from "vitest";
import type { OutputRequest, ToolChoice, ToolDefinition } from "../../engine/types.js";
import { compileJsonSchema } from "../schema/compiled-schema.js";
import type { TemplateCapabilities } from "../template/tool-format.js";
import { planGeneration, planPrompt } from "./plan.js";

const PLAIN: TemplateCapabilities = { tools: undefined, nativeThinking: false };
const HERMES: TemplateCapabilities = { tools: "hermes", nativeThinking: false };
const NAMES = ["get_weather", "get_time", "send_mail"];

function tool(name: string): ToolDefinition {
  const parameters = { type: "object", properties: { q: { type: "string" } }, required: ["q"] };
  return { name, parameters, compiledParameters: compileJsonSchema(parameters) };
}

function plan(toolChoice: ToolChoice, capabilities: TemplateCapabilities = PLAIN) {
  const output: OutputRequest = {
    format: { type: "text" },
    tools: NAMES.map(tool),
    toolChoice,
    parallelToolCalls: true,
  };
  const prompt = planPrompt([{ role: "user", content: "hi" }], output, false, capabilities);
  return { prompt, generation: planGeneration(prompt, "", output, capabilities) };
}

/** The names a call rule of the grammar can write (each call's literal starts with its name). */
function callableNames(grammar: string | undefined): string[] {
  return NAMES.filter((name) => grammar?.includes(`"name\\": \\"${name}\\"`));
}

describe("output plan: tool_choice", () => {
  it("auto and required: every tool callable", () => {
    expect(callableNames(plan("auto").generation.grammar)).toEqual(NAMES);
    expect(callableNames(plan("required").generation.grammar)).toEqual(NAMES);
  });

  it.each(["auto", "required"] as const)(
    "allowed_tools in mode %s: only the allowed tools are callable; the prompt shows all of them",
    (mode) => {
      const allowed = { allowed: ["send_mail", "get_weather"], mode };
      for (const capabilities of [PLAIN, HERMES]) {
        const { prompt, generation } = plan(allowed, capabilities);
        expect(callableNames(generation.grammar)).toEqual(["get_weather", "send_mail"]);
        expect(generation.parser.tools?.mode).toBe(mode);
        const shown =
          prompt.templateTools?.map((t) => t.name) ??
          NAMES.filter((name) => prompt.messages[0]?.content.includes(`"name":"${name}"`));
        expect(shown).toEqual(NAMES);
      }
    },
  );

  it("the prompt is the same whichever tools are allowed (the cached prefix survives a change of choice)", () => {
    const auto = plan("auto", PLAIN).prompt;
    expect(plan({ allowed: ["get_time"], mode: "required" }, PLAIN).prompt).toEqual(auto);
    expect(plan({ allowed: ["send_mail"], mode: "auto" }, HERMES).prompt).toEqual(
      plan("auto", HERMES).prompt,
    );
  });

  it("allowed_tools required: the shortest answer is a call to an allowed tool; auto: it may be text", () => {
    const required = plan({ allowed: ["get_time"], mode: "required" }).generation;
    expect(required.minimalAnswer).toContain('"name": "get_time"');
    expect(plan({ allowed: ["get_time"], mode: "auto" }).generation.minimalAnswer).toBe("");
  });

  it("a named function: only it, required", () => {
    const { generation } = plan({ name: "get_time" });
    expect(callableNames(generation.grammar)).toEqual(["get_time"]);
    expect(generation.parser.tools?.mode).toBe("required");
  });
});
