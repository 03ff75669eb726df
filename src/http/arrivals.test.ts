import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { CONNECTION_ARRIVAL_MS, countArrivals } from "./arrivals.js";

/** What the engine would see: how many requests are on their way, and each one's start and end. */
function counter() {
  let pending = 0;
  return {
    get pending() {
      return pending;
    },
    expect: () => {
      pending++;
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        pending--;
      };
    },
  };
}

let server: Server | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** A real HTTP server whose handler answers when `release` is called. */
async function serve(count: ReturnType<typeof counter>): Promise<{ port: number; release: () => void }> {
  const waiting: (() => void)[] = [];
  server = createServer((_request, response) => {
    waiting.push(() => response.end("ok"));
  });
  countArrivals(server, count.expect);
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  const release = () => {
    for (const answer of waiting.splice(0)) answer();
  };
  return { port: address.port, release };
}

async function open(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  await new Promise((resolve) => socket.once("connect", resolve));
  return socket;
}

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await sleep(2);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const REQUEST = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";

describe("requests on their way, counted at the HTTP edge", () => {
  it("counts a new connection until its request arrives, then the request until it is answered", async () => {
    const count = counter();
    const { port, release } = await serve(count);
    const socket = await open(port);
    await until("the connection to count", () => count.pending === 1);
    socket.write(REQUEST);
    // The request counts in the connection's place: never zero in between, never both.
    await sleep(10);
    expect(count.pending).toBe(1);
    const answered = new Promise((resolve) => socket.once("data", resolve));
    release();
    await answered;
    await until("the answered request to stop counting", () => count.pending === 0);
    // The next request on the kept-alive connection counts from when it is received.
    socket.write(REQUEST);
    await until("the second request to count", () => count.pending === 1);
    release();
    await until("the second request to stop counting", () => count.pending === 0);
  });

  it("does not count a request that cannot generate (not a POST)", async () => {
    const count = counter();
    const { port, release } = await serve(count);
    const socket = await open(port);
    await until("the connection to count", () => count.pending === 1);
    socket.write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    await until("the connection to stop counting", () => count.pending === 0);
    release();
  });

  it("stops counting a connection that sends nothing, or closes", async () => {
    const count = counter();
    const { port } = await serve(count);
    await open(port);
    const closed = await open(port);
    await until("both connections to count", () => count.pending === 2);
    closed.destroy();
    await until("the closed connection to stop counting", () => count.pending === 1);
    await sleep(CONNECTION_ARRIVAL_MS + 20);
    expect(count.pending).toBe(0);
  });
});
