// The client's address behind trusted proxies: X-Forwarded-For only from them, the rightmost hop not one of them.
import { describe, expect, it } from "vitest";
import { resolveClientAddress, trustedProxyList, UNKNOWN_ADDRESS } from "../http/client-address.js";

const trusted = trustedProxyList(["10.0.0.0/8", "192.0.2.1", "::1", "fd00::/8"]);
const resolve = (peer: string | undefined, xff?: string) => resolveClientAddress(peer, xff, trusted);

describe("resolveClientAddress", () => {
  it("is the socket's peer when the peer is not a trusted proxy, whatever X-Forwarded-For says", () => {
    expect(resolve("198.51.100.7", "203.0.113.9")).toBe("198.51.100.7");
    expect(resolve("198.51.100.7")).toBe("198.51.100.7");
    expect(resolveClientAddress("10.0.0.5", "203.0.113.9", trustedProxyList([]))).toBe("10.0.0.5");
  });

  it("behind a trusted proxy is the address the proxy appended, not what the client wrote before it", () => {
    expect(resolve("10.1.2.3", "203.0.113.9")).toBe("203.0.113.9");
    // The client sent "X-Forwarded-For: 1.1.1.1"; the proxy appended the address it saw.
    expect(resolve("10.1.2.3", "1.1.1.1, 203.0.113.9")).toBe("203.0.113.9");
    // Two trusted proxies in a row: skipped from the right.
    expect(resolve("10.1.2.3", "1.1.1.1, 203.0.113.9, 192.0.2.1, 10.9.9.9")).toBe("203.0.113.9");
  });

  it("reads ports, brackets and IPv4-mapped IPv6 as the same address", () => {
    expect(resolve("::ffff:10.1.2.3", "203.0.113.9:4431")).toBe("203.0.113.9");
    expect(resolve("::1", "[2001:db8::1]:443")).toBe("2001:db8::1");
    expect(resolve("::ffff:198.51.100.7")).toBe("198.51.100.7");
  });

  it("stops at a malformed hop, keeping the last address a trusted proxy vouched for", () => {
    expect(resolve("10.1.2.3", "203.0.113.9, not-an-ip")).toBe("10.1.2.3");
    expect(resolve("10.1.2.3", "")).toBe("10.1.2.3");
  });

  it("is the leftmost proxy when every hop is trusted, and 'unknown' without a socket", () => {
    expect(resolve("10.1.2.3", "10.2.2.2, 192.0.2.1")).toBe("10.2.2.2");
    expect(resolve(undefined, "203.0.113.9")).toBe(UNKNOWN_ADDRESS);
  });
});
