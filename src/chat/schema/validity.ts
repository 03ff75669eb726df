// Whether a schema is valid JSON Schema at all (draft 2020-12 or draft-07, by their meta-schemas, with Ajv): a
// non-strict schema is a hint, but `"type": 5` or `"required": "x"` is still a 400 naming the place.
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";
import { JsonSchemaError } from "./json-schema.js";

/**
 * JSON nesting allowed in a schema document before the meta-schemas look at it (their validators recurse once per
 * level; the compiler itself allows 32 schema levels, and `const`/`default` values may nest a little more).
 */
const MAX_NESTING = 128;

type Validate = ((data: unknown) => boolean) & {
  errors?: { instancePath: string; message?: string }[] | null;
};

let validators: { draft2020: Validate; draft07: Validate } | undefined;

function metaValidators(): { draft2020: Validate; draft07: Validate } {
  if (validators === undefined) {
    const draft2020 = new Ajv2020.default({ strict: false }).getSchema(
      "https://json-schema.org/draft/2020-12/schema",
    );
    const draft07 = new Ajv.default({ strict: false }).getSchema("http://json-schema.org/draft-07/schema");
    if (draft2020 === undefined || draft07 === undefined) throw new Error("Ajv's meta-schemas are missing");
    validators = { draft2020: draft2020 as Validate, draft07: draft07 as Validate };
  }
  return validators;
}

/** Throws JsonSchemaError (path from the meta-schema's complaint) unless the schema is valid JSON Schema. */
export function checkSchemaValidity(schema: unknown): void {
  const { draft2020, draft07 } = metaValidators();
  if (draft2020(schema) || draft07(schema)) return;
  const error = draft2020.errors?.[0];
  const path = error === undefined ? "#" : `#${error.instancePath}`;
  throw new JsonSchemaError(`Not a valid JSON Schema: ${path} ${error?.message ?? "is invalid"}.`, path);
}

/**
 * Throws JsonSchemaError for a document nested past the bound. Iterative, and run before anything recursive
 * (hashing the text, the meta-schema validators), so a hostile document cannot overflow the stack.
 */
export function checkNesting(schema: unknown): void {
  const stack: [unknown, number][] = [[schema, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop() as [unknown, number];
    if (typeof value !== "object" || value === null) continue;
    if (depth > MAX_NESTING) {
      throw new JsonSchemaError(`The schema document nests deeper than ${MAX_NESTING} levels.`, "#");
    }
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
}
