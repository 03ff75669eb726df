// The chat template a loaded model renders with: the GGUF's own, or the built-in one its vocabulary's turns select.
import type { LlamaModel } from "node-llama-cpp";
import { fallbackTemplate } from "../../chat/template/fallbacks.js";
import type { PromptRendererOptions } from "../../chat/template/render.js";

/** Texts of the vocabulary's control and user-defined tokens (GGUF token types 3 and 4). */
export function controlTokenTexts(model: LlamaModel): string[] {
  const ggml = model.fileInfo.metadata.tokenizer?.ggml;
  const tokens: readonly string[] = ggml?.tokens ?? [];
  const types: readonly number[] = ggml?.token_type ?? [];
  return tokens.filter((_, i) => types[i] === 3 || types[i] === 4);
}

/** The renderer options of a model: its template (a GGUF without one gets a built-in one), BOS, EOS, specials. */
export function rendererOptionsFor(model: LlamaModel): PromptRendererOptions {
  const specialTokens = controlTokenTexts(model);
  return {
    template: model.fileInfo.metadata.tokenizer?.chat_template ?? fallbackTemplate(specialTokens).template,
    bosToken: model.tokens.bosString ?? "",
    eosToken: model.tokens.eosString ?? "",
    specialTokens,
  };
}
