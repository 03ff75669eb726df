// CSRF tokens for dashboard forms: an HMAC of the session id (or of the sign-in form's nonce cookie).
//
// Reuse: every POST form renders <FormFields auth={auth} /> (layout.tsx), which carries `_csrf`; the session
// middleware (session.ts) checks it before any POST handler runs, so handlers never check it themselves.
import { createHmac, timingSafeEqual } from "node:crypto";

/** Name of the hidden form field that carries the token. */
export const CSRF_FIELD = "_csrf";

export class CsrfTokens {
  /** `key`: 32 secret bytes, the same on every replica (tenancy.keys.deriveSecret("dashboard-csrf")). */
  constructor(private readonly key: Uint8Array) {}

  /** The token of every form shown in one session: stable for the session, worthless after it ends. */
  forSession(sessionId: string): string {
    return this.mac(`session:${sessionId}`);
  }

  /** The sign-in form's token, bound to a random nonce cookie (no session exists yet: login CSRF). */
  forSignIn(nonce: string): string {
    return this.mac(`sign-in:${nonce}`);
  }

  /** The token of another public form (e.g. claiming an invitation), bound to that form's own nonce cookie. */
  forPublicForm(form: string, nonce: string): string {
    return this.mac(`public:${form}:${nonce}`);
  }

  /** Constant-time comparison; false for a missing or malformed token. */
  matches(expected: string, presented: unknown): boolean {
    if (typeof presented !== "string") return false;
    const a = Buffer.from(expected);
    const b = Buffer.from(presented);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  private mac(message: string): string {
    return createHmac("sha256", this.key).update(message).digest("base64url");
  }
}
