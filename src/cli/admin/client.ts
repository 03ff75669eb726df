// The admin API over HTTP for the CLI: the admin token, the request, and the server's error as one message.
import { adminTokenPath, readAdminToken } from "../../auth/admin-token.js";
import type { HearthConfig } from "../../config/schema.js";

/** A failure already worded for the operator; printed as `hearth: <message>`. */
export class AdminCliError extends Error {
  override name = "AdminCliError";
}

/** Query parameters in the order given; an undefined value is left out. */
export type AdminQuery = Readonly<Record<string, string | number | undefined>>;

/** The admin API at `<serverUrl>/admin/v1`; every failure becomes an AdminCliError with the server's message. */
export class AdminClient {
  private readonly serverUrl: string;
  private readonly baseUrl: string;

  constructor(
    private readonly config: HearthConfig,
    private readonly fetchImpl: typeof fetch,
  ) {
    this.serverUrl = config.serverUrl.replace(/\/+$/, "");
    this.baseUrl = `${this.serverUrl}/admin/v1`;
  }

  get<T>(path: string, query: AdminQuery = {}): Promise<T> {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined) search.set(name, String(value));
    }
    return this.request<T>("GET", search.size === 0 ? path : `${path}?${search.toString()}`);
  }

  post<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>("POST", path, body);
  }

  patch<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>("PATCH", path, body);
  }

  delete<T>(path: string): Promise<T> {
    return this.request<T>("DELETE", path);
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    // The token is looked up per request, so a command that fails its own checks first never needs one.
    const token = readAdminToken(this.config);
    if (token === undefined) {
      throw new AdminCliError(
        `no admin token: set HEARTH_ADMIN_TOKEN, or run where the server's data dir is (${adminTokenPath(this.config)} not found; set HEARTH_DATA_DIR)`,
      );
    }
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await this.fetchImpl(this.baseUrl + path, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch {
      throw new AdminCliError(
        `cannot reach the Hearth server at ${this.serverUrl} (is it running? set HEARTH_URL)`,
      );
    }
    const parsed = parseJson(await response.text());
    if (!response.ok)
      throw new AdminCliError(errorMessage(parsed) ?? `the server answered HTTP ${response.status}`);
    if (parsed === undefined)
      throw new AdminCliError(`the server sent an unexpected answer (HTTP ${response.status})`);
    // The admin API's wire types are the contract; the CLI prints what it gets and checks no further.
    return parsed as T;
  }
}

/** One path segment; encoding also keeps a "/" in a model id inside its segment. */
export function pathSegment(value: string): string {
  return encodeURIComponent(value);
}

function parseJson(text: string): unknown {
  try {
    return text === "" ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The message of an OpenAI-shaped error body, when the body is one. */
function errorMessage(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null || !("error" in body)) return undefined;
  const error = body.error;
  if (typeof error !== "object" || error === null || !("message" in error)) return undefined;
  return typeof error.message === "string" ? error.message : undefined;
}
