// Requests and tokens per minute per organization: admission with a token pre-charge, settlement, 429s as OpenAI words them.
import { RateLimitError, type RateLimitKind } from "../errors/api-error.js";
import type { Logger } from "../observability/logger.js";
import { formatDuration, rateLimitHeaders } from "./headers.js";
import type {
  Admission,
  AdmitOptions,
  LimitSubject,
  RateLimiter,
  RateSnapshot,
  WindowState,
} from "./types.js";
import type { WindowCount, WindowStore } from "./window-store.js";

/**
 * A give-back this close to its window's end is dropped: it could land in the next window (Redis counts from its
 * own clock, one round trip away) and hand out credit there. Dropping it only costs the rest of the old window.
 */
const GIVE_BACK_MARGIN_MS = 1000;

/** What a request took from one window, to settle or refund against the same window. */
interface Charge {
  key: string;
  points: number;
  count: WindowCount;
  /** This process's estimate of when the charged window ends. */
  endsAt: number;
}

interface Limits {
  rpm: number | undefined;
  tpm: number | undefined;
}

export interface OrgRateLimiterOptions {
  windows: WindowStore;
  logger: Logger;
  /** Releases what the windows' store holds (a Redis connection). */
  close?: () => Promise<void>;
}

export class OrgRateLimiter implements RateLimiter {
  private readonly windows: WindowStore;
  private readonly logger: Logger;
  private readonly close: (() => Promise<void>) | undefined;

  constructor({ windows, logger, close }: OrgRateLimiterOptions) {
    this.windows = windows;
    this.logger = logger;
    this.close = close;
  }

  async admit(subject: LimitSubject, tokens: number, options: AdmitOptions = {}): Promise<Admission> {
    const { rpm, tpm } = limitsOf(subject);
    let points = toPoints(tokens);
    if (tpm !== undefined && points > tpm) {
      const needed = options.minTokens === undefined ? points : toPoints(options.minTokens);
      if (needed > tpm) throw await this.tooLarge(subject, tpm, needed);
      points = tpm; // only an upper bound was asked for: the whole window, at most
    }
    const keys = keysOf(subject);
    // Both windows are charged at once; a window over its limit gives both charges back, so a refusal consumes nothing.
    const [requests, tokensCharge] = await this.chargeBoth(
      rpm === undefined ? undefined : [keys.requests, 1],
      tpm === undefined ? undefined : [keys.tokens, points],
    );
    const overRequests = rpm !== undefined && requests !== undefined && requests.count.consumed > rpm;
    const overTokens = tpm !== undefined && tokensCharge !== undefined && tokensCharge.count.consumed > tpm;
    if (overRequests || overTokens) {
      await Promise.all([
        requests === undefined ? undefined : this.giveBack(requests, requests.points),
        tokensCharge === undefined ? undefined : this.giveBack(tokensCharge, tokensCharge.points),
      ]);
      const snapshot = {
        ...stateOf("requests", rpm, requests?.count, requests?.points ?? 0),
        ...stateOf("tokens", tpm, tokensCharge?.count, tokensCharge?.points ?? 0),
      };
      // Both full: the later window decides when the client may come back.
      const kind: RateLimitKind =
        overRequests && (!overTokens || (requests?.count.resetMs ?? 0) >= (tokensCharge?.count.resetMs ?? 0))
          ? "requests"
          : "tokens";
      const charge = kind === "requests" ? requests : tokensCharge;
      const limit = (kind === "requests" ? rpm : tpm) ?? 0;
      throw refusal(subject, kind, limit, charge?.count.consumed ?? 0, charge?.points ?? 0, snapshot);
    }
    const snapshot = {
      ...stateOf("requests", rpm, requests?.count, 0),
      ...stateOf("tokens", tpm, tokensCharge?.count, 0),
    };
    return once(snapshot, {
      settle: (actualTokens) => this.settle(tokensCharge, actualTokens),
      refund: () => this.refund([requests, tokensCharge]),
    });
  }

  async snapshot(subject: LimitSubject): Promise<RateSnapshot> {
    const { rpm, tpm } = limitsOf(subject);
    const keys = keysOf(subject);
    const [requests, tokens] = await Promise.all([
      rpm === undefined ? undefined : this.windows.read(keys.requests),
      tpm === undefined ? undefined : this.windows.read(keys.tokens),
    ]);
    return { ...stateOf("requests", rpm, requests, 0), ...stateOf("tokens", tpm, tokens, 0) };
  }

  async dispose(): Promise<void> {
    await this.close?.();
  }

  /** Replaces the token pre-charge by the real count. Never rejects: a failure is logged and the charge stands. */
  private async settle(tokens: Charge | undefined, actualTokens: number): Promise<void> {
    if (tokens === undefined) return;
    try {
      const difference = toPoints(actualTokens) - tokens.points;
      // Tokens used beyond the pre-charge count in whichever window is open now.
      if (difference > 0) await this.windows.add(tokens.key, difference);
      else await this.giveBack(tokens, -difference);
    } catch (err) {
      this.logger.warn({ err, key: tokens.key }, "rate limiter: settling a request's tokens failed");
    }
  }

  /** Gives back what one admission charged. Never rejects. */
  private async refund(charges: (Charge | undefined)[]): Promise<void> {
    await Promise.all(charges.map((c) => (c === undefined ? undefined : this.giveBack(c, c.points))));
  }

  /**
   * Charges both windows concurrently (absent = unlimited). If one charge fails (a store error with no stand-in),
   * the other is given back and the error thrown: admission never leaves half a charge behind.
   */
  private async chargeBoth(
    ...windows: [[string, number] | undefined, [string, number] | undefined]
  ): Promise<[Charge | undefined, Charge | undefined]> {
    const [a, b] = await Promise.allSettled(
      windows.map((w) => (w === undefined ? undefined : this.charge(w[0], w[1]))),
    );
    if (a?.status === "fulfilled" && b?.status === "fulfilled") return [a.value, b.value];
    const charged = [a, b].flatMap((r) =>
      r?.status === "fulfilled" && r.value !== undefined ? [r.value] : [],
    );
    await this.refund(charged);
    throw [a, b].find((r) => r?.status === "rejected")?.reason;
  }

  private async charge(key: string, points: number): Promise<Charge> {
    const count = await this.windows.add(key, points);
    return { key, points, count, endsAt: Date.now() + count.resetMs };
  }

  /** Takes points back from the window that was charged, unless that window has ended (or is about to). */
  private async giveBack(charge: Charge, points: number): Promise<void> {
    if (points <= 0 || Date.now() >= charge.endsAt - GIVE_BACK_MARGIN_MS) return;
    await this.windows.subtract(charge.key, points, charge.count.store);
  }

  private async tooLarge(subject: LimitSubject, tpm: number, requested: number): Promise<RateLimitError> {
    const snapshot = await this.snapshot(subject);
    return new RateLimitError(
      "tokens",
      `Request too large for tokens per min (TPM) in organization ${subject.orgName}: Limit ${tpm}, ` +
        `Requested ${requested}. The input or output tokens must be reduced in order to run successfully.`,
      { retryAfterMs: this.windows.windowMs, headers: rateLimitHeaders(snapshot), retryable: false },
    );
  }
}

/** An admission whose settle or refund runs once: whichever comes first, the other is then a no-op. */
function once(snapshot: RateSnapshot, end: Pick<Admission, "settle" | "refund">): Admission {
  let done = false;
  return {
    snapshot,
    async settle(actualTokens) {
      if (done) return;
      done = true;
      await end.settle(actualTokens);
    },
    async refund() {
      if (done) return;
      done = true;
      await end.refund();
    },
  };
}

/** The org's limits; null and 0 both mean unlimited (as the tenancy layer stores them). */
function limitsOf(subject: LimitSubject): Limits {
  const positive = (value: number | null) => (value === null || value <= 0 ? undefined : value);
  return { rpm: positive(subject.rpm), tpm: positive(subject.tpm) };
}

function keysOf(subject: LimitSubject): { requests: string; tokens: string } {
  return { requests: `rpm:${subject.orgId}`, tokens: `tpm:${subject.orgId}` };
}

function toPoints(tokens: number): number {
  if (!Number.isFinite(tokens)) throw new RangeError(`token count must be a finite number, got ${tokens}`);
  return Math.max(0, Math.ceil(tokens));
}

/** A window's headers state; `ownPoints` is a charge already given back, so not counted as used. */
function stateOf(
  kind: RateLimitKind,
  limit: number | undefined,
  count: WindowCount | undefined,
  ownPoints: number,
): RateSnapshot {
  if (limit === undefined) return {};
  const used = count === undefined ? 0 : count.consumed - ownPoints;
  const state: WindowState = {
    limit,
    remaining: Math.min(limit, Math.max(0, limit - used)),
    resetMs: count === undefined ? 0 : Math.max(0, count.resetMs),
  };
  return { [kind]: state };
}

function refusal(
  subject: LimitSubject,
  kind: RateLimitKind,
  limit: number,
  consumed: number,
  requested: number,
  snapshot: RateSnapshot,
): RateLimitError {
  const window = kind === "requests" ? snapshot.requests : snapshot.tokens;
  const retryAfterMs = Math.min(60_000, Math.max(1, Math.ceil(window?.resetMs ?? 0)));
  // Concurrent refusals may count for an instant; the text never reports more used than the limit.
  const used = Math.min(limit, Math.max(0, consumed - requested));
  const name = kind === "requests" ? "requests per min (RPM)" : "tokens per min (TPM)";
  return new RateLimitError(
    kind,
    `Rate limit reached for ${name} in organization ${subject.orgName}: Limit ${limit}, Used ${used}, ` +
      `Requested ${requested}. Please try again in ${formatDuration(retryAfterMs)}.`,
    { retryAfterMs, headers: rateLimitHeaders(snapshot) },
  );
}
