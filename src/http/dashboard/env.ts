// The dashboard's Hono environment: what the session middleware (session.ts) hands to pages as `c.var.auth`.
import type { Membership } from "../../tenancy/types.js";

/** What pages know about the person in front of them. */
export interface DashboardAuth {
  sessionId: string;
  user: { id: string; email: string };
  /** Every org of the user, by name. */
  memberships: Membership[];
  /** The org this request acts for: `?org=` (GET) or the `org` field (POST), else the first. */
  org: Membership;
  /** The `_csrf` value for this session's forms. */
  csrfToken: string;
  /** Where the dashboard is mounted, e.g. "/dashboard". */
  base: string;
}

export interface DashboardEnv {
  Variables: {
    /** Set by the server's request-id middleware; absent when the dashboard runs alone (tests). */
    requestId: string;
    auth: DashboardAuth;
    base: string;
  };
}
