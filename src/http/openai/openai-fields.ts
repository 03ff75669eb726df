// The OpenAI chat-request fields beyond sampling and output: accepted and ignored, refused capabilities, reasoning_effort.
import { z } from "zod";
import { REASONING_EFFORTS, type ReasoningEffort } from "../../engine/types.js";
import { InvalidRequestError } from "../errors/api-error.js";

const notSupported = (field: string, why: string) => `The '${field}' parameter is not supported: ${why}`;

/** A field Hearth refuses whenever it is present (null already means absent). */
export function refused(message: string) {
  return z
    .unknown()
    .superRefine((_, ctx) => ctx.addIssue({ code: "custom", message }))
    .optional();
}

const moderationMode = z.strictObject({ mode: z.enum(["score", "block"]) }).nullable();

/**
 * `moderation` asks OpenAI to run a moderation model over the input and the output. Hearth runs none: `score` (report
 * scores) is accepted and ignored, but `block` asks Hearth to withhold flagged text, which it cannot do, and silently
 * passing that text on would break the caller's safety rule: a 400.
 */
const moderationSchema = z
  .strictObject({
    model: z.string(),
    policy: z
      .strictObject({ input: moderationMode.optional(), output: moderationMode.optional() })
      .nullable()
      .optional(),
  })
  .superRefine((moderation, ctx) => {
    for (const side of ["input", "output"] as const) {
      if (moderation.policy?.[side]?.mode === "block") {
        ctx.addIssue({
          code: "custom",
          path: ["policy", side, "mode"],
          message:
            "Invalid value for 'moderation.policy': mode 'block' is not supported: Hearth runs no moderation model, so it cannot block flagged text. Use mode 'score' (accepted and ignored) or leave 'moderation' out.",
        });
      }
    }
  });

/**
 * Fields of openai-node 7.x / openai-python 3.x `ChatCompletionCreateParams` that `chat-request.ts` does not map
 * itself. What each does is in docs/compatibility.md; the short version is beside each.
 */
export const openAiFieldsShape = {
  // Mapped onto thinking (thinkingOf below).
  reasoning_effort: z.enum(REASONING_EFFORTS).optional(),
  // Accepted and ignored: they tune OpenAI's own service (length style of reasoning models, cache lifetime).
  verbosity: z.enum(["low", "medium", "high"]).optional(),
  prompt_cache_retention: z.enum(["in_memory", "24h"]).optional(),
  prompt_cache_options: z
    .strictObject({ mode: z.enum(["implicit", "explicit"]).optional(), ttl: z.string().optional() })
    .optional(),
  moderation: moderationSchema.optional(),
  // Text only: asking for audio output is a capability Hearth lacks (OpenAI's text models refuse it alike).
  modalities: z
    .array(z.enum(["text", "audio"]))
    .refine((modalities) => !modalities.includes("audio"), {
      message: notSupported(
        "modalities",
        "Hearth produces text only; send [\"text\"] or leave 'modalities' out.",
      ),
    })
    .optional(),
  audio: refused(notSupported("audio", "Hearth produces text only.")),
  web_search_options: refused(notSupported("web_search_options", "Hearth has no web search.")),
  // `functions` and `function_call` (deprecated) never reach this schema: legacy-functions.ts rewrites them onto tools.
};

/** What the thinking switch is: `reasoning_effort` (none/minimal: off, others: on) or enable_thinking; default off. */
export function thinkingOf(
  effort: ReasoningEffort | undefined,
  enableThinking: boolean | undefined,
): boolean {
  const fromEffort = effort === undefined ? undefined : effort !== "none" && effort !== "minimal";
  if (fromEffort !== undefined && enableThinking !== undefined && fromEffort !== enableThinking) {
    throw new InvalidRequestError(
      `'reasoning_effort' ('${effort}') and 'chat_template_kwargs.enable_thinking' (${enableThinking}) disagree: ` +
        `reasoning_effort 'none' and 'minimal' turn thinking off, the others turn it on. Send one of them, or both agreeing.`,
      "reasoning_effort",
    );
  }
  return fromEffort ?? enableThinking ?? false;
}
