// The security settings of the config: trusted proxies and the metrics token, from the file and the environment.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./load.js";

function configFile(yaml: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "hearth-config-")), "hearth.yaml");
  writeFileSync(path, yaml);
  return path;
}

describe("server.trustedProxies", () => {
  it("is empty by default: the socket's peer is the client", () => {
    expect(loadConfig({ env: {} }).server.trustedProxies).toEqual([]);
  });

  it("takes IPs and CIDR ranges from the file, and HEARTH_TRUSTED_PROXIES over it", () => {
    const path = configFile("server:\n  trustedProxies: [10.0.0.0/8, '::1']\n");
    expect(loadConfig({ configPath: path, env: {} }).server.trustedProxies).toEqual(["10.0.0.0/8", "::1"]);
    const env = { HEARTH_TRUSTED_PROXIES: " 127.0.0.1, 172.16.0.0/12 ," };
    expect(loadConfig({ configPath: path, env }).server.trustedProxies).toEqual([
      "127.0.0.1",
      "172.16.0.0/12",
    ]);
  });

  it("refuses anything that is not an address or a range, naming it", () => {
    expect(() =>
      loadConfig({ configPath: configFile("server:\n  trustedProxies: [proxy.lan]\n"), env: {} }),
    ).toThrow(/server\.trustedProxies\.0: an IP address or a CIDR range/);
    expect(() => loadConfig({ env: { HEARTH_TRUSTED_PROXIES: "10.0.0.0/33" } })).toThrow(ConfigError);
    expect(() => loadConfig({ env: { HEARTH_TRUSTED_PROXIES: "10.0.0.0/8/1" } })).toThrow(
      /HEARTH_TRUSTED_PROXIES/,
    );
  });
});

describe("metrics.token", () => {
  it("is unset by default, read from the file, and HEARTH_METRICS_TOKEN wins", () => {
    expect(loadConfig({ env: {} }).metricsToken).toBeUndefined();
    const path = configFile("metrics:\n  token: from-the-file\n");
    expect(loadConfig({ configPath: path, env: {} }).metricsToken).toBe("from-the-file");
    expect(loadConfig({ configPath: path, env: { HEARTH_METRICS_TOKEN: "from-env" } }).metricsToken).toBe(
      "from-env",
    );
  });
});

describe("server.bootstrapKeyExpiresInDays and server.signInConcurrency", () => {
  it("default to 7 days and 2 checks at once", () => {
    expect(loadConfig({ env: {} }).server).toMatchObject({
      bootstrapKeyExpiresInDays: 7,
      signInConcurrency: 2,
    });
  });
});

describe("hearth.example.yaml", () => {
  it("loads, with the documented security defaults", () => {
    const path = join(import.meta.dirname, "..", "..", "hearth.example.yaml");
    const config = loadConfig({ configPath: path, env: {} });
    expect(config.server).toMatchObject({
      trustedProxies: [],
      signInConcurrency: 2,
      bootstrapKeyExpiresInDays: 7,
    });
    expect(config.metricsToken).toBeUndefined();
  });
});
