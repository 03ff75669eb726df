// The ApiError a call throws, for unit tests of request parsing (fails the test when it throws none).
import { ApiError } from "../../src/http/errors/api-error.js";

export function apiErrorOf(run: () => unknown): ApiError {
  try {
    run();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error("expected an ApiError, but the call returned");
}
