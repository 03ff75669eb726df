// Dashboard sign-in sessions: a random token lives in the browser's cookie, only its SHA-256 in the store.
// Idle and absolute expiry are enforced on every lookup; an expired row is deleted when it is seen. No HTTP.
import { createHash, randomBytes } from "node:crypto";
import { and, eq, lte, ne } from "drizzle-orm";
import { base62 } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import { sessions, users } from "../store/schema.js";

/** How long sessions live: `idleMs` since the last request, `lifetimeMs` since sign-in at most. */
export interface SessionPolicy {
  idleMs: number;
  lifetimeMs: number;
}

/** A valid session. `userId`/`email` are null for an operator session (opened with the admin token). */
export interface ActiveSession {
  id: string;
  userId: string | null;
  email: string | null;
  operator: boolean;
  createdAt: Date;
  /** The absolute end (sign-in + lifetime); the idle limit may end it sooner. */
  expiresAt: Date;
}

export type SessionLookup =
  | { status: "active"; session: ActiveSession }
  /** The token named a session that has ended by time: worth telling the person so. */
  | { status: "expired" }
  /** No such session: never issued, signed out, or removed with its user. */
  | { status: "unknown" };

export type SessionSubject = { userId: string } | { operator: true };

// lastSeenAt is written at most this often: idle expiry is accurate to a minute, and a page view costs no write.
const TOUCH_EVERY_MS = 60_000;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export function hashSessionToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export class SessionService {
  constructor(
    private readonly db: StoreDb,
    private readonly now: () => number = Date.now,
  ) {}

  /** Opens a session; the returned token (32 random bytes) goes into the cookie and nowhere else. */
  async create(
    subject: SessionSubject,
    policy: SessionPolicy,
  ): Promise<{ token: string; session: ActiveSession }> {
    const token = randomBytes(32).toString("base64url");
    const now = new Date(this.now());
    const userId = "userId" in subject ? subject.userId : null;
    const row = {
      // Not a secret: the primary key, safe to log. The store's id registry has no session kind yet.
      id: `sess_${base62(randomBytes(16))}`,
      tokenHash: hashSessionToken(token),
      userId,
      operator: !("userId" in subject),
      createdAt: now,
      lastSeenAt: now,
      expiresAt: new Date(now.getTime() + policy.lifetimeMs),
    };
    await this.db.insert(sessions).values(row);
    let email: string | null = null;
    if (userId !== null) {
      const [user] = await this.db.select({ email: users.email }).from(users).where(eq(users.id, userId));
      email = user?.email ?? null;
    }
    const session = {
      id: row.id,
      userId,
      email,
      operator: row.operator,
      createdAt: now,
      expiresAt: row.expiresAt,
    };
    return { token, session };
  }

  /** The session a cookie token names, if it is still within both limits. */
  async resolve(token: string, policy: Pick<SessionPolicy, "idleMs">): Promise<SessionLookup> {
    if (!TOKEN_PATTERN.test(token)) return { status: "unknown" };
    const [row] = await this.db
      .select({ session: sessions, email: users.email })
      .from(sessions)
      .leftJoin(users, eq(sessions.userId, users.id))
      .where(eq(sessions.tokenHash, hashSessionToken(token)))
      .limit(1);
    if (row === undefined) return { status: "unknown" };
    const { session } = row;
    const now = this.now();
    if (session.expiresAt.getTime() <= now || session.lastSeenAt.getTime() + policy.idleMs <= now) {
      await this.db.delete(sessions).where(eq(sessions.id, session.id));
      return { status: "expired" };
    }
    if (now - session.lastSeenAt.getTime() >= TOUCH_EVERY_MS) {
      await this.db
        .update(sessions)
        .set({ lastSeenAt: new Date(now) })
        .where(eq(sessions.id, session.id));
    }
    return {
      status: "active",
      session: {
        id: session.id,
        userId: session.userId,
        email: row.email,
        operator: session.operator,
        createdAt: session.createdAt,
        expiresAt: session.expiresAt,
      },
    };
  }

  /** Signs out: the row is deleted, so the token is worthless even if it was copied. */
  async end(token: string): Promise<void> {
    if (!TOKEN_PATTERN.test(token)) return;
    await this.db.delete(sessions).where(eq(sessions.tokenHash, hashSessionToken(token)));
  }

  /** Ends every session of a user (e.g. after a password change). */
  async endAllFor(userId: string): Promise<void> {
    await this.db.delete(sessions).where(eq(sessions.userId, userId));
  }

  /** Ends every session of a user but `keepId` (after a password change: a stolen session dies, this one stays). */
  async endOthers(userId: string, keepId: string): Promise<number> {
    const ended = await this.db
      .delete(sessions)
      .where(and(eq(sessions.userId, userId), ne(sessions.id, keepId)))
      .returning({ id: sessions.id });
    return ended.length;
  }

  /** Deletes sessions past their absolute end; idle ones go when seen or when they reach it. */
  async deleteExpired(): Promise<number> {
    const deleted = await this.db
      .delete(sessions)
      .where(and(lte(sessions.expiresAt, new Date(this.now()))))
      .returning({ id: sessions.id });
    return deleted.length;
  }
}
