// Dashboard sign-in under a burst of guesses (issue 12, item 3): the throttle counts an attempt before its password
// is checked, and the password checks (scrypt) running at once are bounded; both refuse with 429, never queue.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { FakeEngine } from "../support/fake-engine.js";
import { FormClient } from "../support/form-client.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

type Members = TestApp<FakeEngine>["services"]["tenancy"]["members"];

/**
 * Holds every password check (members.authenticate: one scrypt each) until `release()`, counting them and the most
 * running at once, so a burst is seen whole: every request either reached a check or was answered without one.
 */
function holdPasswordChecks(members: Members) {
  const real = members.authenticate.bind(members);
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const counts = { checks: 0, running: 0, mostRunning: 0 };
  const spy = vi.spyOn(members, "authenticate").mockImplementation(async (email, password) => {
    counts.checks++;
    counts.running++;
    counts.mostRunning = Math.max(counts.mostRunning, counts.running);
    try {
      await released;
      return await real(email, password);
    } finally {
      counts.running--;
    }
  });
  return { counts, release, restore: () => spy.mockRestore() };
}

/**
 * Sends one sign-in per entry of `emails` at once from one browser, holding the password checks until every
 * request has either reached one or been answered without one; then lets the checks run.
 */
async function burst(harness: TestApp<FakeEngine>, emails: string[], password: string) {
  const client = new FormClient(harness.app);
  const csrf = await client.csrf("/dashboard/sign-in");
  const held = holdPasswordChecks(harness.services.tenancy.members);
  try {
    const answered: Response[] = [];
    const pending = emails.map((email) =>
      client.post("/dashboard/sign-in", { _csrf: csrf, email, password }).then((res) => {
        answered.push(res);
        return res;
      }),
    );
    await vi.waitFor(() => expect(held.counts.checks + answered.length).toBe(emails.length), {
      timeout: 10_000,
    });
    const answeredWithoutCheck = [...answered];
    const counts = { ...held.counts };
    held.release();
    return { counts, answeredWithoutCheck, all: await Promise.all(pending) };
  } finally {
    held.release();
    held.restore();
  }
}

/** The app for the enclosing describe block, with `signInConcurrency` password checks at once. */
function appAllowing(signInConcurrency: number): { current(): TestApp<FakeEngine> } {
  let harness: TestApp<FakeEngine> | undefined;
  beforeAll(async () => {
    harness = await startTestApp({ server: { signInConcurrency } });
  });
  afterAll(async () => {
    await harness?.close();
  });
  return {
    current() {
      if (harness === undefined) throw new Error("the app did not start");
      return harness;
    },
  };
}

describe("a burst of wrong passwords for one account from one address", () => {
  // Room for every check at once, so only the throttle can hold the burst back.
  const app = appAllowing(64);

  it("gets at most the throttle's allowance (5) of password checks, and 429s for the rest", async () => {
    const harness = app.current();
    const emails = Array<string>(20).fill(harness.owner.email);
    const { counts, answeredWithoutCheck, all } = await burst(harness, emails, "not the password");
    expect(counts.checks).toBe(5);
    expect(answeredWithoutCheck.map((r) => r.status)).toEqual(Array(15).fill(429));
    expect(all.filter((r) => r.status === 401)).toHaveLength(5);
    for (const refused of answeredWithoutCheck) {
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    // The budget is spent: even the right password is refused now, without a check.
    const after = await burst(harness, [harness.owner.email], harness.owner.password);
    expect(after.counts.checks).toBe(0);
    expect(after.all[0]?.status).toBe(429);
  });

  it("gives the attempt back on success: right passwords in a row never lock the account", async () => {
    const harness = app.current();
    const other = await harness.services.tenancy.users.create({
      orgName: "default",
      email: "steady@example.com",
      password: "a steady password",
    });
    for (let i = 0; i < 8; i++) {
      const { all } = await burst(harness, [other.email], "a steady password");
      expect(all[0]?.status).toBe(303);
    }
  });
});

describe("password checks at once", () => {
  const app = appAllowing(2);

  it("are bounded by server.signInConcurrency: the rest get 429 with retry-after at once, nothing queues", async () => {
    const harness = app.current();
    // Different accounts, so the per-account-and-address budget (5) is not what refuses them.
    const emails = Array.from({ length: 10 }, (_, i) => `burst-${i}@example.com`);
    const { counts, answeredWithoutCheck, all } = await burst(harness, emails, "whatever it is");
    expect(counts.mostRunning).toBe(2);
    expect(answeredWithoutCheck.map((r) => r.status)).toEqual(Array(8).fill(429));
    for (const res of answeredWithoutCheck) {
      expect(res.headers.get("retry-after")).toBe("1");
      expect(await res.text()).toContain("checking many sign-ins right now");
    }
    expect(all.filter((r) => r.status === 401)).toHaveLength(2);
    // Refused without a check, they spent none of their accounts' attempts.
    const again = await burst(harness, ["burst-9@example.com"], "whatever it is");
    expect(again.counts.checks).toBe(1);
  });
});
