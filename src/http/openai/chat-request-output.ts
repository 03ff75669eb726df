// The request fields that shape the reply (response_format, tools, tool_choice, parallel_tool_calls): schemas and checks.
import { z } from "zod";
import { BudgetMeter, SCHEMA_BUDGET_DEFAULTS, type SchemaBudget } from "../../chat/schema/budget.js";
import { type CompiledSchema, compileJsonSchema } from "../../chat/schema/compiled-schema.js";
import type {
  OutputRequest,
  ResponseFormat,
  ToolCall,
  ToolChoice,
  ToolDefinition,
} from "../../engine/types.js";
import { InvalidRequestError } from "../errors/api-error.js";
import { domainApiError } from "../errors/domain-errors.js";

/** OpenAI's rule for function names; it also keeps names safe inside grammar literals and call envelopes. */
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const functionName = z
  .string()
  .regex(FUNCTION_NAME, "Function names must be 1 to 64 characters of a-z, A-Z, 0-9, underscore and dash");

const jsonSchemaObject = z.record(z.string(), z.unknown());

export const responseFormatSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    json_schema: z.strictObject({
      name: z
        .string()
        .regex(FUNCTION_NAME, "Names must be 1 to 64 characters of a-z, A-Z, 0-9, underscore and dash"),
      description: z.string().optional(),
      schema: z.union([jsonSchemaObject, z.boolean()]).optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

export const toolSchema = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({
    name: functionName,
    description: z.string().optional(),
    parameters: jsonSchemaObject.optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

/** OpenAI's custom tools (free-text or grammar input) are a capability Hearth lacks: refused by name, not by shape. */
const CUSTOM_TOOLS =
  'Custom tools (type \'custom\') are not supported: Hearth calls functions only; declare the tool as {"type": "function", "function": {...}}.';

/** A `tools` entry: a custom tool is named as unsupported instead of the literal mismatch on `type`. */
export const toolEntrySchema = z
  .unknown()
  .superRefine((tool, ctx) => {
    if (isObject(tool) && tool.type === "custom")
      ctx.addIssue({ code: "custom", path: ["type"], message: CUSTOM_TOOLS });
  })
  .pipe(toolSchema);

const namedFunction = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({ name: z.string() }),
});

const allowedTools = z.strictObject({
  type: z.literal("allowed_tools"),
  allowed_tools: z.strictObject({
    mode: z.enum(["auto", "required"]),
    tools: z.array(namedFunction).min(1),
  }),
});

/** Every form OpenAI's chat API has, as the 400 for anything else lists them. */
export const TOOL_CHOICE_FORMS =
  `'none', 'auto', 'required', {"type": "function", "function": {"name": ...}}, and ` +
  `{"type": "allowed_tools", "allowed_tools": {"mode": "auto" | "required", "tools": [{"type": "function", "function": {"name": ...}}, ...]}}`;

/**
 * A string outside the three, or an object of no known type, gets one message listing every accepted form; an
 * object of a known type is checked by its own schema, so its 400 names the field inside it that is wrong.
 */
export const toolChoiceSchema = z
  .unknown()
  .superRefine((choice, ctx) => {
    const known =
      choice === "none" ||
      choice === "auto" ||
      choice === "required" ||
      (isObject(choice) && (choice.type === "function" || choice.type === "allowed_tools"));
    if (isObject(choice) && choice.type === "custom") {
      ctx.addIssue({ code: "custom", message: `Invalid value for 'tool_choice': ${CUSTOM_TOOLS}` });
    } else if (!known) {
      ctx.addIssue({
        code: "custom",
        message: `Invalid value for 'tool_choice': ${JSON.stringify(choice)?.slice(0, 100)}. Supported values are: ${TOOL_CHOICE_FORMS}.`,
      });
    }
  })
  // Objects first: for an object, its own branch's issue (a path inside it) is the one reported.
  .pipe(
    z.union([
      z.discriminatedUnion("type", [namedFunction, allowedTools]),
      z.enum(["none", "auto", "required"]),
    ]),
  );

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An assistant message's earlier calls, sent back for the round trip. */
export const assistantToolCallSchema = z.strictObject({
  id: z.string(),
  type: z.literal("function"),
  // `parsed_arguments`: openai-node's `parse` adds the parsed arguments to each call; ignored (`arguments` is the text).
  function: z.strictObject({
    name: z.string(),
    arguments: z.string(),
    parsed_arguments: z.unknown().optional(),
  }),
});

export function toToolCall(call: z.infer<typeof assistantToolCallSchema>): ToolCall {
  return { id: call.id, name: call.function.name, arguments: call.function.arguments };
}

export interface OutputFields {
  response_format?: z.infer<typeof responseFormatSchema> | undefined;
  tools?: z.output<typeof toolSchema>[] | undefined;
  tool_choice?: z.output<typeof toolChoiceSchema> | undefined;
  parallel_tool_calls?: boolean | undefined;
}

/**
 * Cross-field rules and schema checks; undefined when the reply is free text (the engine's plain path). Each
 * schema is compiled here, once, and travels compiled beside its raw form (which an upstream engine forwards).
 * All the request's schemas draw on one `budget` (config `server.schemaBudget`): past it, a 400 names the limit.
 */
export function parseOutputRequest(
  fields: OutputFields,
  budget: SchemaBudget = SCHEMA_BUDGET_DEFAULTS,
): OutputRequest | undefined {
  const meter = new BudgetMeter(budget);
  const tools = fields.tools ?? [];
  if (fields.tools === undefined) {
    if (fields.tool_choice !== undefined) {
      throw new InvalidRequestError(
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
        "tool_choice",
      );
    }
    if (fields.parallel_tool_calls !== undefined) {
      throw new InvalidRequestError(
        "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.",
        "parallel_tool_calls",
      );
    }
  }
  const definitions = tools.map((tool, i) => toolDefinition(tool, i, meter));
  const seen = new Set<string>();
  for (const [i, tool] of definitions.entries()) {
    if (seen.has(tool.name)) {
      throw new InvalidRequestError(
        `Duplicate function name '${tool.name}' in 'tools'.`,
        `tools[${i}].function.name`,
      );
    }
    seen.add(tool.name);
  }
  const toolChoice = toChoice(fields.tool_choice, definitions);
  const format = toFormat(fields.response_format, meter);
  if (format.type === "text" && definitions.length === 0) return undefined;
  return {
    format,
    tools: definitions,
    toolChoice,
    parallelToolCalls: fields.parallel_tool_calls ?? true,
  };
}

/** What a function without `parameters` takes: an object, with any properties. */
const NO_PARAMETERS = Object.freeze({ type: "object", properties: {} });

function toolDefinition(tool: z.infer<typeof toolSchema>, index: number, meter: BudgetMeter): ToolDefinition {
  const fn = tool.function;
  const param = `tools[${index}].function.parameters`;
  const compiledParameters = checkSchema(fn.parameters ?? NO_PARAMETERS, param, meter, fn.strict === true);
  const root = resolvedRoot(compiledParameters);
  if (root.kind !== "object" && root.kind !== "any") {
    throw new InvalidRequestError(
      `Invalid '${param}': the parameters schema must describe an object.`,
      param,
    );
  }
  const definition: ToolDefinition = { name: fn.name, compiledParameters };
  if (fn.description !== undefined) definition.description = fn.description;
  if (fn.parameters !== undefined) definition.parameters = fn.parameters;
  return definition;
}

function toChoice(choice: OutputFields["tool_choice"], tools: readonly ToolDefinition[]): ToolChoice {
  if (choice === undefined) return "auto";
  if (typeof choice === "string") return choice;
  if (choice.type === "function") {
    return { name: declaredName(choice.function.name, tools, "tool_choice.function.name") };
  }
  const { mode, tools: listed } = choice.allowed_tools;
  const allowed = listed.map((tool, i) =>
    declaredName(tool.function.name, tools, `tool_choice.allowed_tools.tools[${i}].function.name`),
  );
  return { allowed: [...new Set(allowed)], mode };
}

/** A name tool_choice refers to must be one of `tools` (OpenAI's rule, and the grammar needs its schema). */
function declaredName(name: string, tools: readonly ToolDefinition[], param: string): string {
  if (!tools.some((tool) => tool.name === name)) {
    throw new InvalidRequestError(
      `Invalid value for 'tool_choice': no function named '${name}' is specified in 'tools'.`,
      param,
    );
  }
  return name;
}

function toFormat(format: OutputFields["response_format"], meter: BudgetMeter): ResponseFormat {
  if (format === undefined || format.type === "text") return { type: "text" };
  if (format.type === "json_object") return { type: "json_object" };
  const schema = format.json_schema.schema;
  if (schema === undefined) return { type: "json_object" };
  const compiled = checkSchema(
    schema,
    "response_format.json_schema.schema",
    meter,
    format.json_schema.strict === true,
  );
  return { type: "json_schema", name: format.json_schema.name, schema, compiled };
}

/**
 * The one compilation of a request's schema; one it cannot take is a 400 naming the schema's place. `strict` (the
 * client's `strict: true`): every keyword enforced or a 400; otherwise the schema is a hint, as OpenAI treats it.
 */
function checkSchema(
  schema: Readonly<Record<string, unknown>> | boolean,
  param: string,
  meter: BudgetMeter,
  strict: boolean,
): CompiledSchema {
  try {
    return compileJsonSchema(schema, { meter, strict });
  } catch (error) {
    throw domainApiError(error, { param }) ?? error;
  }
}

/** The root past references (`{"$ref": "#/$defs/Args", "$defs": ...}`), bounded by the number of definitions. */
function resolvedRoot(compiled: CompiledSchema): CompiledSchema["root"] {
  let node = compiled.root;
  for (let hops = 0; node.kind === "ref" && hops <= compiled.defs.size; hops++) {
    node = compiled.defs.get(node.name) ?? { kind: "any" };
  }
  return node;
}
