// One-time messages from a dashboard POST to the page it redirects to (Post/Redirect/Get): a new key's secret, an
// invitation link. Kept in the store, so the GET may land on any replica; bound to the session; deleted by the
// read that returns it, so a reload shows nothing. Payloads are sealed with AES-256-GCM under a key derived from
// the server key secret: the secrets they carry never rest in clear, and a row is useless without the server.
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { and, eq, lte } from "drizzle-orm";
import { newId } from "../store/ids.js";
import type { StoreDb } from "../store/open-store.js";
import { dashboardFlashes } from "../store/schema.js";

/** Long enough for a redirect on a slow link, short enough that a forgotten flash does not linger. */
export const FLASH_TTL_MS = 10 * 60_000;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const FLASH_ID_PATTERN = /^flash_[0-9A-Za-z]{22}$/;

export interface FlashServiceOptions {
  /** 32 bytes, the same on every replica (tenancy.keys.deriveSecret("dashboard-flash")). */
  key: Uint8Array;
  now: () => number;
}

export class FlashService {
  constructor(
    private readonly db: StoreDb,
    private readonly options: FlashServiceOptions,
  ) {}

  /** Stores `value` for the session's next read of the returned id. */
  async put(sessionId: string, value: unknown): Promise<string> {
    const id = newId("flash");
    const now = this.options.now();
    // Whoever puts also sweeps: flashes that were never read (the redirect never followed) go after their TTL.
    await this.db.delete(dashboardFlashes).where(lte(dashboardFlashes.expiresAt, new Date(now)));
    await this.db.insert(dashboardFlashes).values({
      id,
      sessionId,
      payload: this.seal(id, sessionId, JSON.stringify(value)),
      expiresAt: new Date(now + FLASH_TTL_MS),
    });
    return id;
  }

  /**
   * The value stored under `id` for this session, deleted in the same statement, so two reads (a double reload,
   * two replicas) never both get it. Undefined for an unknown, used, expired or another session's id.
   */
  async take(sessionId: string, id: string): Promise<unknown> {
    if (!FLASH_ID_PATTERN.test(id)) return undefined;
    const [row] = await this.db
      .delete(dashboardFlashes)
      .where(and(eq(dashboardFlashes.id, id), eq(dashboardFlashes.sessionId, sessionId)))
      .returning();
    if (row === undefined || row.expiresAt.getTime() <= this.options.now()) return undefined;
    const text = this.open(id, sessionId, row.payload);
    return text === undefined ? undefined : JSON.parse(text);
  }

  // The id and session are the additional data: a sealed payload moved to another row or session fails to open.
  private seal(id: string, sessionId: string, text: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.options.key, iv);
    cipher.setAAD(Buffer.from(`${id}\n${sessionId}`));
    const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64");
  }

  private open(id: string, sessionId: string, sealed: string): string | undefined {
    const raw = Buffer.from(sealed, "base64");
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.options.key, raw.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(`${id}\n${sessionId}`));
      decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
        "utf8",
      );
    } catch {
      // Sealed under another server key secret (rotated) or tampered with: as good as gone.
      return undefined;
    }
  }
}
