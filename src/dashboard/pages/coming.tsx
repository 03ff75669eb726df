// Placeholder for pages not built yet (Usage, Models, Limits): one route each, replaced by registering the real
// page's route instead (app.tsx).
import type { Hono } from "hono";
import { NAV_ITEMS, type NavId, renderPage } from "../layout.js";
import type { DashboardEnv } from "../session.js";

export function registerComingPage(app: Hono<DashboardEnv>, id: NavId): void {
  const item = NAV_ITEMS.find((i) => i.id === id);
  if (item === undefined) throw new Error(`unknown dashboard page "${id}"`);
  app.get(item.path, (c) =>
    renderPage(
      c,
      { title: item.label, active: id },
      <section>
        <h1>{item.label}</h1>
        <p>This page is coming soon.</p>
      </section>,
    ),
  );
}
