// The floor of the fleet bench's added latency: a process that forwards each request to one worker and relays the
// answer, with nothing else (no auth, validation, limits, usage, metrics or logs): node:http in, undici out, as the
// gateway. `node --import tsx bench/pass-through-proxy.ts <worker url>` prints its own URL on stdout.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, request } from "undici";

const target = process.argv[2];
if (target === undefined) throw new Error("usage: pass-through-proxy.ts <worker url>");
const agent = new Agent({ keepAliveTimeout: 4_000 });
const server = createServer(async (req, res) => {
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const upstream = await request(`${target}${req.url ?? "/"}`, {
      method: "POST",
      dispatcher: agent,
      headers: { authorization: req.headers.authorization ?? "", "content-type": "application/json" },
      body: Buffer.concat(chunks),
    });
    res.writeHead(upstream.statusCode, { "content-type": String(upstream.headers["content-type"]) });
    for await (const chunk of upstream.body) res.write(chunk);
    res.end();
  } catch (err) {
    res.destroy(err as Error);
  }
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
