// Post/Redirect/Get for results that carry a secret (a new key, an invitation link): the POST stores the result
// as a one-time flash of the session (tenancy/flash.ts) and redirects with its id; the GET takes it, so a reload
// shows the page without it and re-submits nothing. The secret never travels in a URL, only the flash's id.
import type { Context } from "hono";
import { z } from "zod";
import { link } from "./layout.js";
import type { DashboardDeps, DashboardEnv } from "./session.js";

/** The query parameter that names the flash to show. */
export const FLASH_PARAM = "flash";

const flashSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("key"), name: z.string().nullable(), key: z.string(), last4: z.string() }),
  z.object({
    kind: z.literal("invitation"),
    email: z.string(),
    role: z.enum(["owner", "member"]),
    link: z.string(),
    expiresAt: z.string(),
  }),
]);
export type DashboardFlash = z.infer<typeof flashSchema>;
export type FlashOf<K extends DashboardFlash["kind"]> = Extract<DashboardFlash, { kind: K }>;

/** Stores `flash` for this session and answers with a 303 to `path` (of the active org) that will show it. */
export async function redirectWithFlash(
  c: Context<DashboardEnv>,
  deps: DashboardDeps,
  path: string,
  flash: DashboardFlash,
): Promise<Response> {
  const auth = c.get("auth");
  const id = await deps.tenancy.flash.put(auth.sessionId, flash);
  return c.redirect(link(auth, path, { [FLASH_PARAM]: id }), 303);
}

/** The flash of kind `kind` this request names, once; undefined when none, already shown, or of another kind. */
export async function takeFlash<K extends DashboardFlash["kind"]>(
  c: Context<DashboardEnv>,
  deps: DashboardDeps,
  kind: K,
): Promise<FlashOf<K> | undefined> {
  const id = c.req.query(FLASH_PARAM);
  if (id === undefined) return undefined;
  const parsed = flashSchema.safeParse(await deps.tenancy.flash.take(c.get("auth").sessionId, id));
  if (!parsed.success || parsed.data.kind !== kind) return undefined;
  return parsed.data as FlashOf<K>;
}
