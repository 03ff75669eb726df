// hearth.yaml's `responses:` block: how long stored responses are kept and what one request may make the store hold
// or read back (docs/responses.md "Stored responses").
import { z } from "zod";
import { parseByteSize, parseKeepAlive } from "./durations.js";

const DAY_MS = 86_400_000;
/** Past this a Date stops being able to say when a response expires; a retention anyone means fits well below. */
const MAX_RETENTION_MS = 100 * 365 * DAY_MS;

/** A duration in the config's grammar ("720h", "90m", "30s", or seconds as a number), as milliseconds. */
const retentionSchema = z.union([z.number(), z.string()]).transform((value, ctx) => {
  const ms = parseKeepAlive(value);
  if (ms === undefined || ms === null || ms < 1000 || ms > MAX_RETENTION_MS) {
    ctx.addIssue({
      code: "custom",
      message: 'a duration of at least 1s, such as "720h" (30 days), "24h" or "90m", or seconds as a number',
    });
    return z.NEVER;
  }
  return ms;
});

const bytesSchema = (min: number) =>
  z.union([z.number(), z.string()]).transform((value, ctx) => {
    const bytes = parseByteSize(value);
    if (bytes === undefined || bytes < min || bytes > 2 ** 31 - 1) {
      ctx.addIssue({
        code: "custom",
        message: `bytes (at least ${min}, under 2GiB), or a size such as "8MiB"`,
      });
      return z.NEVER;
    }
    return bytes;
  });

/** What a rebuilt `previous_response_id` conversation may hold (the model's context is checked after these). */
export const chainBoundsSchema = z
  .object({
    maxResponses: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(1000)
      .describe("responses of one previous_response_id chain read back"),
    maxItems: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(10_000)
      .describe("input and output items of the whole chain"),
    maxBytes: bytesSchema(1024)
      .default(16 * 2 ** 20)
      .describe("JSON bytes of the chain's items"),
  })
  .strict();

export const responsesConfigSchema = z
  .object({
    retention: retentionSchema
      .default(30 * DAY_MS)
      .describe("how long a stored response is kept; then it is gone (reads) and removed (the sweep)"),
    maxInputItems: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(2048)
      .describe("input items of one request; more is a 400 naming input"),
    maxStoredBytes: bytesSchema(1024)
      .default(8 * 2 ** 20)
      .describe("JSON bytes of one request's input; more is a 400 naming input"),
    chain: chainBoundsSchema.default(chainBoundsSchema.parse({})),
  })
  .strict();

/** `retention` in milliseconds, byte sizes in bytes. */
export type ResponsesConfig = z.infer<typeof responsesConfigSchema>;
export const RESPONSES_CONFIG_DEFAULTS: ResponsesConfig = Object.freeze(responsesConfigSchema.parse({}));
