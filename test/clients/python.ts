// Runs a client-library script of test/clients/python with the venv's python against the tier's server, and reads
// its checks' report (hearth_checks.py: one JSON object on the last stdout line).
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { inject } from "vitest";
import { hearth } from "./hearth.js";

const SCRIPTS = join(import.meta.dirname, "python");

type CheckResult = { ok: true; value: unknown } | { ok: false; error: string };

export interface PythonChecks {
  /** The value a check returned; throws the library's own error when the check failed, so the test shows it. */
  value<T = Record<string, unknown>>(check: string): T;
}

/** A proxy on the discard port: any request a library makes anywhere but Hearth (127.0.0.1) fails at once. */
const NO_NETWORK = {
  HTTP_PROXY: "http://127.0.0.1:9",
  HTTPS_PROXY: "http://127.0.0.1:9",
  ALL_PROXY: "http://127.0.0.1:9",
  NO_PROXY: "127.0.0.1,localhost",
};

export async function runPythonChecks(script: string): Promise<PythonChecks> {
  const { baseURL, apiKey, model } = hearth();
  const { stdout, stderr } = await promisify(execFile)(inject("clientsPython"), [join(SCRIPTS, script)], {
    cwd: SCRIPTS,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      HEARTH_BASE_URL: baseURL,
      HEARTH_API_KEY: apiKey,
      HEARTH_MODEL: model,
      // LiteLLM reads its bundled cost map instead of fetching one; LangSmith, the Agents SDK's tracing (an export
      // to OpenAI's servers) and the Hugging Face hub stay off.
      LITELLM_LOCAL_MODEL_COST_MAP: "True",
      LANGSMITH_TRACING: "false",
      OPENAI_AGENTS_DISABLE_TRACING: "1",
      HF_HUB_OFFLINE: "1",
      PYTHONUNBUFFERED: "1",
      // No __pycache__ beside the scripts in the checkout.
      PYTHONDONTWRITEBYTECODE: "1",
      ...NO_NETWORK,
    },
    timeout: 150_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const last = stdout.trim().split("\n").at(-1) ?? "";
  let results: Record<string, CheckResult>;
  try {
    results = JSON.parse(last) as Record<string, CheckResult>;
  } catch {
    throw new Error(`${script} printed no report:\n${stdout}\n${stderr}`);
  }
  return {
    value<T>(check: string): T {
      const result = results[check];
      if (result === undefined) throw new Error(`${script} reported no check '${check}'`);
      if (!result.ok) throw new Error(`${script} ${check}: ${result.error}`);
      return result.value as T;
    },
  };
}
