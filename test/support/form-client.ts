// A browser in miniature for in-memory dashboard tests: keeps cookies, posts forms, never follows redirects.

/** What the client sends requests to: a Hono app's in-memory `request`. */
export interface RequestTarget {
  request(path: string, init: RequestInit): Response | Promise<Response>;
}

export class FormClient {
  readonly cookies = new Map<string, string>();
  /** The Set-Cookie lines of the last response. */
  setCookies: string[] = [];

  constructor(private readonly target: RequestTarget) {}

  get(path: string): Promise<Response> {
    return this.send(path, { method: "GET" });
  }

  /** A urlencoded form; an array value repeats the field. */
  post(
    path: string,
    form: Record<string, string | string[]>,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    const body = new URLSearchParams();
    for (const [name, value] of Object.entries(form)) {
      for (const v of Array.isArray(value) ? value : [value]) body.append(name, v);
    }
    return this.send(path, {
      method: "POST",
      body: body.toString(),
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    });
  }

  /** The hidden CSRF token of the page at `path`. */
  async csrf(path: string): Promise<string> {
    const token = /name="_csrf" value="([^"]+)"/.exec(await (await this.get(path)).text())?.[1];
    if (token === undefined) throw new Error(`no CSRF token on ${path}`);
    return token;
  }

  private async send(path: string, init: RequestInit): Promise<Response> {
    const headers = new Headers(init.headers);
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    if (cookie !== "") headers.set("cookie", cookie);
    const res = await this.target.request(path, { ...init, headers });
    this.setCookies = res.headers.getSetCookie();
    for (const line of this.setCookies) {
      const [name, value = ""] = (line.split(";")[0] ?? "").split("=");
      if (name === undefined) continue;
      if (value === "" || /max-age=0/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }
}

const ENTITIES: Readonly<Record<string, string>> = {
  "&quot;": '"',
  "&#39;": "'",
  "&lt;": "<",
  "&gt;": ">",
  "&amp;": "&",
};

/** The page's HTML with the entities JSX escapes turned back into characters. */
export async function pageText(res: Response): Promise<string> {
  return (await res.text()).replace(/&quot;|&#39;|&lt;|&gt;|&amp;/g, (e) => ENTITIES[e] ?? e);
}
