// Requests on their way to the engine, counted from where the HTTP edge first sees them (Engine.expectRequest): the
// embedded engine's step loop waits a bounded moment for them before a step that starts others, so that requests
// sent together start together (docs/models.md, "Requests sent together start together").
import type { IncomingMessage, Server } from "node:http";
import type { Socket } from "node:net";
import type { Context } from "hono";
import type { AppEnv } from "./env.js";
import { nodeBindings } from "./node-request.js";

/**
 * How long a new connection counts as a request on its way before its first request arrives. Clients that open
 * connections for a burst send on them within milliseconds; a connection opened ahead of time (a pool warming up, a
 * load balancer's TCP check) must not hold steps for long.
 */
export const CONNECTION_ARRIVAL_MS = 50;

const requests = new WeakMap<IncomingMessage, () => void>();

/**
 * Counts, through `expect`, every new connection until its first request is received (or it closes, or
 * CONNECTION_ARRIVAL_MS pass), and every POST request (only those generate) from when it is received until it is
 * answered; the completions service ends a chat or responses request's count earlier, as it is queued (`arrivalOf`).
 */
export function countArrivals(server: Server, expect: () => () => void): void {
  const connections = new WeakMap<Socket, () => void>();
  const connectionArrived = (socket: Socket) => {
    connections.get(socket)?.();
    connections.delete(socket);
  };
  server.on("connection", (socket: Socket) => {
    connections.set(socket, expect());
    socket.once("close", () => connectionArrived(socket));
    setTimeout(() => connectionArrived(socket), CONNECTION_ARRIVAL_MS).unref();
  });
  // Before the app's own listener: the request counts before anything of it runs.
  server.prependListener("request", (request: IncomingMessage, response) => {
    if (request.method === "POST") {
      const arrived = expect();
      requests.set(request, arrived);
      response.once("close", arrived);
    }
    connectionArrived(request.socket);
  });
}

/** Ends this request's count as on its way (idempotent); absent for in-memory requests (`app.request()` in tests). */
export function arrivalOf(c: Context<AppEnv>): (() => void) | undefined {
  const incoming = nodeBindings(c)?.incoming;
  return incoming === undefined ? undefined : requests.get(incoming);
}
