// The Hono environment shared by every sub-app: per-request variables set by middleware.
import type { Principal } from "../auth/principal.js";

export interface AppEnv {
  Variables: {
    requestId: string;
    principal: Principal;
    /** The chat completion's model once parsed (request metrics label it only if configured). */
    model: string;
  };
}
