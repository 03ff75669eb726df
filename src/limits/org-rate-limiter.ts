// Requests and tokens per minute per organization: admission with a token pre-charge, settlement, and refusals that
// carry what their 429 needs.
import type { Logger } from "../observability/logger.js";
import { RateLimitRefusal } from "./rate-limit-refusal.js";
import type {
  Admission,
  AdmitOptions,
  LimitKind,
  LimitSubject,
  RateLimiter,
  RateSnapshot,
  RequestCharge,
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

  async chargeRequest(subject: LimitSubject): Promise<RequestCharge> {
    const { rpm } = limitsOf(subject);
    if (rpm === undefined) return this.requestCharge(subject, undefined, {});
    const keys = keysOf(subject);
    const charge = await this.charge(keys.requests, 1);
    if (charge.count.consumed > rpm) {
      // A refusal counts nothing: a client hammering a full window does not keep it full.
      await this.giveBack(charge, charge.points);
      const tokens = await this.windowState("tokens", limitsOf(subject).tpm, keys.tokens);
      const snapshot = { ...stateOf("requests", rpm, charge.count, charge.points), ...tokens };
      throw refusal(subject, "requests", rpm, charge.count.consumed, charge.points, snapshot);
    }
    return this.requestCharge(subject, charge, stateOf("requests", rpm, charge.count, 0));
  }

  async admitTokens(request: RequestCharge, tokens: number, options: AdmitOptions = {}): Promise<Admission> {
    const { subject } = request;
    const { tpm } = limitsOf(subject);
    if (tpm === undefined) {
      return once(request.snapshot, { settle: async () => {}, refund: () => request.refund() });
    }
    let points = toPoints(tokens);
    if (points > tpm) {
      const needed = options.minTokens === undefined ? points : toPoints(options.minTokens);
      if (needed > tpm) throw await this.tooLarge(subject, tpm, needed);
      points = tpm; // only an upper bound was asked for: the whole window, at most
    }
    const charge = await this.charge(keysOf(subject).tokens, points);
    if (charge.count.consumed > tpm) {
      await this.giveBack(charge, charge.points);
      const snapshot = { ...request.snapshot, ...stateOf("tokens", tpm, charge.count, charge.points) };
      throw refusal(subject, "tokens", tpm, charge.count.consumed, charge.points, snapshot);
    }
    const snapshot = { ...request.snapshot, ...stateOf("tokens", tpm, charge.count, 0) };
    return once(snapshot, {
      settle: (actualTokens) => this.settle(charge, actualTokens),
      refund: async () => {
        await Promise.all([this.refund([charge]), request.refund()]);
      },
    });
  }

  async admit(subject: LimitSubject, tokens: number, options: AdmitOptions = {}): Promise<Admission> {
    const request = await this.chargeRequest(subject);
    try {
      return await this.admitTokens(request, tokens, options);
    } catch (err) {
      await request.refund();
      throw err;
    }
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

  /** Gives back what was charged. Never rejects. */
  private async refund(charges: (Charge | undefined)[]): Promise<void> {
    await Promise.all(charges.map((c) => (c === undefined ? undefined : this.giveBack(c, c.points))));
  }

  /** A counted request; its refund gives the one request back, once. */
  private requestCharge(
    subject: LimitSubject,
    charge: Charge | undefined,
    snapshot: RateSnapshot,
  ): RequestCharge {
    let refunded = false;
    return {
      subject,
      snapshot,
      refund: async () => {
        if (refunded || charge === undefined) return;
        refunded = true;
        await this.refund([charge]);
      },
    };
  }

  /** One window's headers state, read without charging (the other window of a refusal). */
  private async windowState(kind: LimitKind, limit: number | undefined, key: string): Promise<RateSnapshot> {
    if (limit === undefined) return {};
    return stateOf(kind, limit, await this.windows.read(key), 0);
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

  private async tooLarge(subject: LimitSubject, tpm: number, requested: number): Promise<RateLimitRefusal> {
    return new RateLimitRefusal({
      kind: "tokens",
      reason: "too_large",
      orgName: subject.orgName,
      limit: tpm,
      used: 0,
      requested,
      retryAfterMs: this.windows.windowMs,
      snapshot: await this.snapshot(subject),
    });
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

/** Whether the org has a tokens-per-minute limit: only then does a request's prompt count before it runs. */
export function limitsTokens(subject: LimitSubject): boolean {
  return limitsOf(subject).tpm !== undefined;
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
  kind: LimitKind,
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
  kind: LimitKind,
  limit: number,
  consumed: number,
  requested: number,
  snapshot: RateSnapshot,
): RateLimitRefusal {
  const window = kind === "requests" ? snapshot.requests : snapshot.tokens;
  return new RateLimitRefusal({
    kind,
    reason: "exhausted",
    orgName: subject.orgName,
    limit,
    // Concurrent refusals may count for an instant; the text never reports more used than the limit.
    used: Math.min(limit, Math.max(0, consumed - requested)),
    requested,
    retryAfterMs: Math.min(60_000, Math.max(1, Math.ceil(window?.resetMs ?? 0))),
    snapshot,
  });
}
