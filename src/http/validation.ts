// The HTTP edge's one JSON body reader and one zod validator: bad input becomes a 400 in OpenAI's words, with the
// offending parameter in `param`, for /v1 and /admin/v1 alike.
import type { z } from "zod";
import { InvalidRequestError } from "./errors/api-error.js";

export interface ParseJsonBodyOptions {
  /** What an empty (or all-whitespace) body stands for; absent: an empty body is not JSON and is refused. */
  emptyBody?: unknown;
}

/** Bad JSON is a 400 with OpenAI's wording, never a 500. */
export function parseJsonBody(text: string, options: ParseJsonBodyOptions = {}): unknown {
  if ("emptyBody" in options && text.trim() === "") return options.emptyBody;
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidRequestError(
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library " +
        "correctly. Hearth expects a JSON payload, but what was sent was not valid JSON.)",
    );
  }
}

/**
 * Parses `raw` (a JSON body or a query's fields) with `schema`; otherwise a 400 naming the first issue. A custom
 * issue's message is used as written, so a schema's own checks say a whole sentence ("Invalid value for 'x': …").
 */
export function validate<S extends z.ZodType>(raw: unknown, schema: S): z.output<S> {
  // reportInput: an issue carries the value its schema saw, which tells a coerced query value from the text sent.
  const result = schema.safeParse(raw, { reportInput: true });
  if (result.success) return result.data;
  const [first] = result.error.issues;
  throw first === undefined ? new InvalidRequestError("Invalid request body.") : issueToError(first, raw);
}

// --- zod issue → one OpenAI-style message and param ---

function issueToError(
  issue: z.core.$ZodIssue,
  body: unknown,
  prefix: readonly PropertyKey[] = [],
): InvalidRequestError {
  const path = [...prefix, ...issue.path];
  const param = formatParam(path);
  const name = param ?? "body";
  const value = valueAt(body, path);
  switch (issue.code) {
    case "custom":
      return new InvalidRequestError(issue.message, param);
    case "invalid_type":
      if (value === undefined)
        return new InvalidRequestError(`Missing required parameter: '${name}'.`, param);
      // A query's text that did not coerce (limit=abc): the text is what the client sent, not its type.
      if (typeof value === "string" && typeof issue.input !== "string") {
        return new InvalidRequestError(
          `Invalid value for '${name}': expected ${wanted([issue.expected])}, but got ${show(value)} instead.`,
          param,
        );
      }
      return typeError(name, [issue.expected], value, param);
    case "too_small":
    case "too_big":
      return new InvalidRequestError(rangeMessage(issue, name, value), param);
    case "invalid_value":
      return new InvalidRequestError(
        `Invalid value for '${name}': ${show(value)}. Supported values are: ${listOf(issue.values)}.`,
        param,
      );
    case "unrecognized_keys": {
      const key = issue.keys[0] ?? "";
      return param === null
        ? new InvalidRequestError(`Unrecognized request argument supplied: ${key}`, key)
        : new InvalidRequestError(
            `Unrecognized argument supplied in '${param}': ${key}`,
            formatParam([...path, key]),
          );
    }
    case "invalid_union": {
      if (issue.discriminator !== undefined) {
        if (value === undefined)
          return new InvalidRequestError(`Missing required parameter: '${name}'.`, param);
        return new InvalidRequestError(
          `Invalid value for '${name}': ${show(value)}. Supported values are: ${listOf("options" in issue ? (issue.options ?? []) : [])}.`,
          param,
        );
      }
      // The branch that got past the type check is the one the client meant (an array for `stop`): report its issue.
      const branches = issue.errors.map((branch) => branch[0]).filter((first) => first !== undefined);
      const meant = branches.find((first) => !(first.code === "invalid_type" && first.path.length === 0));
      if (meant !== undefined) return issueToError(meant, body, path);
      const expected = branches.flatMap((first) => (first.code === "invalid_type" ? [first.expected] : []));
      return value === undefined
        ? new InvalidRequestError(`Missing required parameter: '${name}'.`, param)
        : typeError(name, expected, value, param);
    }
    default:
      return new InvalidRequestError(`Invalid '${name}': ${issue.message}.`, param);
  }
}

function typeError(name: string, expected: readonly string[], value: unknown, param: string | null) {
  return new InvalidRequestError(
    `Invalid type for '${name}': expected ${wanted(expected)}, but got ${describe(value)} instead.`,
    param,
  );
}

function wanted(expected: readonly string[]): string {
  return expected.map((e) => EXPECTED[e] ?? e).join(" or ");
}

const EXPECTED: Readonly<Record<string, string>> = Object.freeze({
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  array: "an array",
  object: "an object",
  record: "an object",
});

function rangeMessage(
  issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig,
  name: string,
  value: unknown,
) {
  const small = issue.code === "too_small";
  const bound = small ? issue.minimum : issue.maximum;
  const op = (small ? ">" : "<") + (issue.inclusive === false ? "" : "=");
  if (issue.origin === "array" && Array.isArray(value)) {
    return small
      ? `Invalid '${name}': expected an array with at least ${bound} element(s), but got ${value.length === 0 ? "an empty array" : `${value.length}`} instead.`
      : `Invalid '${name}': expected an array with at most ${bound} element(s), but got ${value.length} instead.`;
  }
  if (issue.origin === "string" && typeof value === "string") {
    return `Invalid '${name}': expected a string with ${small ? "at least" : "at most"} ${bound} character(s), but got ${value.length === 0 ? "an empty string" : `${value.length}`} instead.`;
  }
  return `Invalid '${name}': expected a value ${op} ${bound}, but got ${show(value)} instead.`;
}

/** OpenAI's spelling of a parameter path: messages[2].content[0].type. */
function formatParam(path: readonly PropertyKey[]): string | null {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out === "" ? String(key) : `.${String(key)}`;
  }
  return out === "" ? null : out;
}

/** The raw value the client sent at a path: messages name null apart from absent, which the parsed data cannot. */
function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let current = body;
  for (const key of path) {
    if (current === null || typeof current !== "object" || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number") return Number.isInteger(value) ? "an integer" : "a decimal number";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

function show(value: unknown): string {
  return typeof value === "string" ? `'${value}'` : String(JSON.stringify(value));
}

function listOf(values: readonly unknown[]): string {
  const shown = values.map(show);
  return shown.length <= 2 ? shown.join(" and ") : `${shown.slice(0, -1).join(", ")}, and ${shown.at(-1)}`;
}
