// The upstream HTTP client against a real local server: discarding an unread body never raises an uncaught error.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const CLIENT = fileURLToPath(new URL("./http-client.ts", import.meta.url));

// In a process of its own: vitest's workers do not surface this uncaught error, a plain Node process does (and dies).
const SCRIPT = `
import { createServer } from "node:http";
import { UpstreamHttpClient } from ${JSON.stringify(CLIENT)};
process.on("uncaughtException", (error) => console.log("uncaught", error.code));
// A small complete error body (a tokenize route the engine lacks): the client reads the status only.
const server = createServer((_req, res) => {
  res.writeHead(404, { "content-type": "application/json" });
  res.end('{"error":"not found"}');
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const client = new UpstreamHttpClient();
const response = await client.post("http://127.0.0.1:" + server.address().port + "/tokenize", {
  headers: {}, body: "{}", signal: new AbortController().signal,
});
console.log("status", response.status);
response.discard();
await new Promise((resolve) => setTimeout(resolve, 200));
await client.close();
server.close();
console.log("end");
`;

describe("UpstreamHttpClient", () => {
  it("discard() of an unread body frees it without an uncaught error", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", SCRIPT],
      { timeout: 30_000 },
    );
    expect(stdout.trim().split("\n")).toEqual(["status 404", "end"]);
  });
});
