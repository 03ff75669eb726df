// The operator view at <base>/operator: sign-in with the admin token, then organizations, grants and limits, and
// the models (load, unload).
// Registered before the members' session middleware (app.tsx): it has its own session, cookie and checks.
import { Hono } from "hono";
import type { DashboardDeps, DashboardEnv } from "../session.js";
import { operatorErrorPage } from "./frame.js";
import { registerOperatorModels } from "./models.js";
import { type OperatorEnv, requireOperator } from "./operator-session.js";
import { registerOperatorOrgs } from "./orgs.js";
import { registerOperatorSignIn, registerOperatorSignOut } from "./sign-in.js";

export function registerOperator(app: Hono<DashboardEnv>, deps: DashboardDeps): void {
  const operator = new Hono<OperatorEnv>();
  const adminToken = deps.adminToken;
  if (adminToken === undefined) {
    operator.all("*", (c) =>
      operatorErrorPage(
        c,
        404,
        "Operator view off",
        "This server runs without an admin token, so it has no operator view.",
      ),
    );
  } else {
    registerOperatorSignIn(operator, deps, adminToken);
    operator.use("*", requireOperator(deps));
    registerOperatorSignOut(operator, deps);
    registerOperatorOrgs(operator, deps);
    registerOperatorModels(operator, deps);
    operator.all("*", (c) =>
      operatorErrorPage(c, 404, "Page not found", `There is no operator page at ${c.req.path}.`),
    );
  }
  app.route("/operator", operator);
}
