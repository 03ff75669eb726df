// The client's address, the one answer every throttle and log line uses: the socket's peer, or behind trusted
// reverse proxies (server.trustedProxies) the rightmost X-Forwarded-For hop that is not one of them.

import { BlockList, isIP } from "node:net";
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context } from "hono";
import { parseProxyEntry } from "../config/schema.js";
import { requestHeader } from "./node-request.js";

/** What requests without a socket (in-memory `app.request()`) are counted as. */
export const UNKNOWN_ADDRESS = "unknown";

/** Reads a request's client address; built once from the configured trusted proxies. */
export type ClientAddress = (c: Context) => string;

/** Membership test over the configured proxies; entries were validated by the config schema. */
export function trustedProxyList(entries: readonly string[]): (address: string) => boolean {
  const list = new BlockList();
  for (const entry of entries) {
    const parsed = parseProxyEntry(entry);
    if (parsed === null) throw new Error(`not an IP address or CIDR range: ${entry}`);
    list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return (address) => {
    const version = isIP(address);
    return version !== 0 && list.check(address, version === 4 ? "ipv4" : "ipv6");
  };
}

/** "::ffff:10.0.0.1" is 10.0.0.1: one client, one throttle key, whichever socket family it came over. */
export function normaliseAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped?.[1] ?? address.toLowerCase();
}

/** One X-Forwarded-For hop without its port or brackets ("[::1]:443", "1.2.3.4:80"); null when not an IP. */
function forwardedHop(hop: string): string | null {
  const trimmed = hop.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(trimmed)?.[1];
  const v4WithPort = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(trimmed)?.[1];
  const candidate = bracketed ?? v4WithPort ?? trimmed;
  return isIP(candidate) === 0 ? null : normaliseAddress(candidate);
}

/**
 * The client behind `peer`: the peer itself unless it is a trusted proxy; then X-Forwarded-For is walked from
 * the right (each proxy appends the address it saw), skipping trusted proxies, and the first other hop is the
 * client. Hops left of it were written by the client and are never believed. A malformed hop ends the walk at the
 * last address a trusted proxy vouched for; a chain of proxies only gives the leftmost of them.
 */
export function resolveClientAddress(
  peer: string | undefined,
  forwardedFor: string | undefined,
  isTrusted: (address: string) => boolean,
): string {
  if (peer === undefined || peer === "") return UNKNOWN_ADDRESS;
  let client = normaliseAddress(peer);
  if (!isTrusted(client) || forwardedFor === undefined) return client;
  const hops = forwardedFor.split(",");
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = forwardedHop(hops[i] ?? "");
    if (hop === null) return client;
    client = hop;
    if (!isTrusted(hop)) return hop;
  }
  return client;
}

/** The request's client address: see resolveClientAddress. No trusted proxies: always the socket's peer. */
export function createClientAddress(trustedProxies: readonly string[]): ClientAddress {
  const isTrusted = trustedProxyList(trustedProxies);
  const trustsNobody = trustedProxies.length === 0;
  return (c) => {
    // getConnInfo reads the Node server's bindings; in-memory requests (app.request() in tests) have none.
    const peer = c.env === undefined ? undefined : getConnInfo(c).remote.address;
    return resolveClientAddress(
      peer,
      trustsNobody ? undefined : requestHeader(c, "x-forwarded-for"),
      isTrusted,
    );
  };
}
