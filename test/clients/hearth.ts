// What a client-tier test file needs from the tier's server (test/clients/global-setup.ts): where it is, a key and
// the model, as the libraries take them.
import { inject } from "vitest";

export interface HearthEndpoint {
  /** `http://127.0.0.1:PORT/v1`. */
  baseURL: string;
  apiKey: string;
  model: string;
}

export function hearth(): HearthEndpoint {
  return { baseURL: inject("hearthBaseUrl"), apiKey: inject("hearthApiKey"), model: inject("hearthModel") };
}

/** The bounds zod 4 writes for every `z.number().int()` (±(2^53 − 1)): the schemas must carry them to the server. */
export const ZOD_INT_BOUND = Number.MAX_SAFE_INTEGER;
