// Built-in chat templates for a GGUF without `tokenizer.chat_template`, chosen by the turn tokens its vocabulary has.

/**
 * A turn format and the control tokens that identify it: a vocabulary that has every one of `turnTokens` as a
 * control token was trained on this format. Checked in order; the last one (ChatML) is the default, as in llama.cpp.
 */
export interface FallbackTemplate {
  name: string;
  turnTokens: readonly string[];
  template: string;
}

/**
 * Gemma's turns (`<start_of_turn>user … <end_of_turn>`, the assistant is `model`), as in Google's Gemma 3 template:
 * the BOS first, a system message prefixed to the first user turn. Unlike Google's, it neither trims client text
 * (so prompts split exactly into template and client text) nor raises on roles out of order: a `tool` result is a
 * user turn wrapped in `<tool_response>` (the prompted tool format's convention), a later system message a user turn.
 */
const GEMMA = [
  "{{ bos_token }}",
  "{%- if messages[0]['role'] == 'system' -%}",
  "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}",
  "{%- set loop_messages = messages[1:] -%}",
  "{%- if loop_messages | length == 0 -%}{{ '<start_of_turn>user\\n' + messages[0]['content'] + '<end_of_turn>\\n' }}{%- endif -%}",
  "{%- else -%}",
  "{%- set first_user_prefix = '' -%}",
  "{%- set loop_messages = messages -%}",
  "{%- endif -%}",
  "{%- for message in loop_messages -%}",
  "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = 'user' -%}{%- endif -%}",
  "{{ '<start_of_turn>' + role + '\\n' }}",
  "{%- if loop.first -%}{{ first_user_prefix }}{%- endif -%}",
  "{%- if message['role'] == 'tool' -%}{{ '<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}",
  "{%- else -%}{{ message['content'] }}{%- endif -%}",
  "{{ '<end_of_turn>\\n' }}",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}",
].join("");

/** ChatML, the format most small instruct models use (and llama.cpp's default for a GGUF without a template). */
const CHATML =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export const FALLBACK_TEMPLATES: readonly FallbackTemplate[] = Object.freeze([
  Object.freeze({
    name: "gemma",
    turnTokens: Object.freeze(["<start_of_turn>", "<end_of_turn>"]),
    template: GEMMA,
  }),
  Object.freeze({
    name: "chatml",
    turnTokens: Object.freeze(["<|im_start|>", "<|im_end|>"]),
    template: CHATML,
  }),
]);

/** The built-in template whose turn tokens the vocabulary's control tokens include; ChatML when none matches. */
export function fallbackTemplate(controlTokens: readonly string[]): FallbackTemplate {
  const vocabulary = new Set(controlTokens);
  const match = FALLBACK_TEMPLATES.find((format) =>
    format.turnTokens.every((token) => vocabulary.has(token)),
  );
  return match ?? (FALLBACK_TEMPLATES.at(-1) as FallbackTemplate);
}
