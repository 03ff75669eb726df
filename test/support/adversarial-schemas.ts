// JSON Schemas built to make a naive compiler do exponential or quadratic work; shared by tests and bench/schema-worst.ts.

type Schema = Record<string, unknown>;

/**
 * Unions whose siblings are merged into every option, nested `depth` times: each level's `items` (the whole level
 * below) is shared by `width` options. Text grows linearly with depth; a compiler that copies the siblings into
 * each option compiles width^depth nodes.
 */
export function nestedUnions(width: number, depth: number): Schema {
  let schema: Schema = { type: "string" };
  for (let level = 0; level < depth; level++) {
    schema = {
      type: "array",
      items: schema,
      anyOf: Array.from({ length: width }, (_, i) => ({ maxItems: i + 1 })),
    };
  }
  return schema;
}

/**
 * A DAG of `count` definitions, each a union of two references to the one before: `shortest()` without
 * memoisation visits 2^count paths.
 */
export function defsDag(count: number): Schema {
  const defs: Record<string, Schema> = { d0: { type: "integer" } };
  for (let i = 1; i < count; i++) {
    defs[`d${i}`] = {
      anyOf: [
        { type: "array", items: { $ref: `#/$defs/d${i - 1}` }, minItems: 1 },
        { type: "object", properties: { v: { $ref: `#/$defs/d${i - 1}` } }, required: ["v"] },
      ],
    };
  }
  return { $ref: `#/$defs/d${count - 1}`, $defs: defs };
}

/** Definitions each requiring two copies of the one before: the shortest instance itself is 2^count long. */
export function defsDoubling(count: number): Schema {
  const defs: Record<string, Schema> = { d0: { type: "integer" } };
  for (let i = 1; i < count; i++) {
    const ref = { $ref: `#/$defs/d${i - 1}` };
    defs[`d${i}`] = { type: "object", properties: { a: ref, b: ref }, required: ["a", "b"] };
  }
  return { $ref: `#/$defs/d${count - 1}`, $defs: defs };
}

/** Arrays of arrays, each with `minItems`: the shortest instance has minItems^depth leaves. */
export function minItemsProduct(minItems: number, depth: number): Schema {
  let schema: Schema = { type: "integer" };
  for (let level = 0; level < depth; level++) schema = { type: "array", items: schema, minItems };
  return schema;
}

/** An object with `count` optional properties (a grammar that inlines every later property is quadratic). */
export function manyOptional(count: number): Schema {
  const properties = Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`p${i}`, { type: "integer" }]),
  );
  return { type: "object", properties };
}

/** Objects nested `depth` levels. */
export function deepNesting(depth: number): Schema {
  let schema: Schema = { type: "integer" };
  for (let level = 0; level < depth; level++) {
    schema = { type: "object", properties: { x: schema }, required: ["x"] };
  }
  return schema;
}

/** An enum of `count` strings. */
export function hugeEnum(count: number): Schema {
  return { enum: Array.from({ length: count }, (_, i) => `value-${i}`) };
}

/** Strings with distinct `maxLength`s: llama.cpp expands each bound into that many rules. */
export function manyLengths(count: number, maxLength = 1000): Schema {
  const properties = Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`s${i}`, { type: "string", maxLength: maxLength - i }]),
  );
  return { type: "object", properties, required: Object.keys(properties) };
}

/**
 * `count` numbers, each with its own awkward range (16-digit integer bounds, fractional exclusive bounds): every
 * range is its own digit-range grammar.
 */
export function manyRanges(count: number): Schema {
  const properties: Record<string, Schema> = {};
  for (let i = 0; i < count; i++) {
    properties[`i${i}`] = {
      type: "integer",
      minimum: -9007199254740991 + i * 7919,
      maximum: 9007199254740991 - i * 104729,
    };
    properties[`n${i}`] = {
      type: "number",
      exclusiveMinimum: i + 0.123456789,
      exclusiveMaximum: i * 1000 + 987.654321,
    };
  }
  return { type: "object", properties, required: Object.keys(properties) };
}

/** `count` distinct patterns with alternations, classes and bounded repetitions near the quantifier limit. */
export function manyPatterns(count: number): Schema {
  const properties = Object.fromEntries(
    Array.from({ length: count }, (_, i) => [
      `p${i}`,
      {
        type: "string",
        pattern: `^(?:[a-z]{1,${40 + i}}-|(?:ab|cd|e[fg]){1,30})+[0-9A-F]{${i % 8},${64 + i}}(x|y|z)?$`,
      },
    ]),
  );
  return { type: "object", properties, required: Object.keys(properties) };
}

/** One pattern near the length limit: an alternation of `words` words. */
export function longPattern(words: number): Schema {
  const alternatives = Array.from({ length: words }, (_, i) => `w${i.toString(36)}[a-z]?`);
  return { type: "string", pattern: `^(?:${alternatives.join("|")})$` };
}

/** Every supported string format, `copies` times each. */
export function manyFormats(copies: number): Schema {
  const formats = ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];
  const properties: Record<string, Schema> = {};
  for (let i = 0; i < copies; i++) {
    for (const format of formats) properties[`${format}-${i}`] = { type: "string", format };
  }
  return { type: "object", properties, required: Object.keys(properties) };
}

/** Every shape, sized to be refused or close to the limits, for the benchmark (built on demand: some are large). */
export const worstSchemas = (): { name: string; schema: Schema }[] => [
  { name: "nested unions 2^12 (width 2, depth 12)", schema: nestedUnions(2, 12) },
  { name: "nested unions 8^8 (width 8, depth 8)", schema: nestedUnions(8, 8) },
  { name: "nested unions 30^2", schema: nestedUnions(30, 2) },
  { name: "$defs DAG of 24 (2^24 paths)", schema: defsDag(24) },
  { name: "$defs doubling 12 (4096 leaves)", schema: defsDoubling(12) },
  { name: "$defs doubling 30 (2^30 leaves)", schema: defsDoubling(30) },
  { name: "minItems 100^3", schema: minItemsProduct(100, 3) },
  { name: "minItems 10^4", schema: minItemsProduct(10, 4) },
  { name: "1000 optional properties", schema: manyOptional(1000) },
  { name: "1990 optional properties", schema: manyOptional(1990) },
  { name: "5000 optional properties", schema: manyOptional(5000) },
  { name: "deep nesting 32", schema: deepNesting(32) },
  { name: "enum of 1000", schema: hugeEnum(1000) },
  { name: "enum of 4000", schema: hugeEnum(4000) },
  { name: "enum of 100000", schema: hugeEnum(100000) },
  { name: "10 string maxLengths near 1000", schema: manyLengths(10) },
  { name: "100 string maxLengths near 1000", schema: manyLengths(100) },
  { name: "20 integer and 20 decimal ranges", schema: manyRanges(20) },
  { name: "200 integer and 200 decimal ranges", schema: manyRanges(200) },
  { name: "20 distinct patterns", schema: manyPatterns(20) },
  { name: "200 distinct patterns", schema: manyPatterns(200) },
  { name: "a pattern of 100 alternatives", schema: longPattern(100) },
  { name: "every format x 20", schema: manyFormats(20) },
];

/**
 * A recursion through `width` array options that differ only in their bounds: no parse can tell them apart before
 * it nests, so llama.cpp's open parses multiply by `width` per level of the output (refused as too complex).
 */
export function ambiguousRecursion(width: number): Schema {
  const self = { $ref: "#/$defs/node" };
  const options = Array.from({ length: width }, (_, i) => ({ type: "array", items: self, maxItems: 4 + i }));
  return { $defs: { node: { anyOf: options } }, $ref: "#/$defs/node" };
}
