// An expected refusal and whose doing it was; domain code throws these and only src/http/ turns them into statuses.

/**
 * Whose doing a refusal was: the client's (its input, its limits, its leaving) or the server's (overloaded, loading,
 * an engine or store that failed). A client's refusal keeps its request counted, as OpenAI counts unsuccessful
 * requests; a server's gives it back.
 */
export type Fault = "client" | "server";

/**
 * Base of every expected refusal: a small named error near its concern that says whose doing it was, so a caller
 * (the completions service refunding a charge) decides without knowing which HTTP status it becomes. Anything thrown
 * that is not a Refusal is a fault of the server.
 */
export abstract class Refusal extends Error {
  abstract readonly fault: Fault;
}

/** True for a refusal the client caused; false for the server's and for anything that is not a refusal (a bug). */
export function isClientsDoing(err: unknown): boolean {
  return err instanceof Refusal && err.fault === "client";
}
