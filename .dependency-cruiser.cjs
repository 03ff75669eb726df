// Import rules of src/, checked by `npm run check:imports` (part of `npm test`): no cycles, HTTP only at the edge,
// the engine knows nothing of who calls it. docs/decisions.md ("The HTTP edge: error layers and import rules") says why.

/** Tests sit next to the code they test; they may reach across layers (an app test needs the whole app). */
const TESTS = "\\.test\\.tsx?$";
/** The composition root and the composition it calls: they wire every layer, the edge included. */
const COMPOSITION = ["^src/main\\.ts$", "^src/app/"];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment:
        "A cycle: modules that cannot be read, tested or loaded one without the other. Type-only imports count too.",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "no-unresolvable",
      severity: "error",
      comment:
        "An import the checker cannot resolve would pass every other rule unseen: resolution must never fail.",
      from: { path: "^src/" },
      to: { couldNotResolve: true },
    },
    {
      name: "http-libraries-only-in-http",
      severity: "error",
      comment:
        "Only src/http/ knows Hono and node:http: domain code, and the composition too, has no HTTP in it.",
      from: { path: "^src/", pathNot: ["^src/http/", TESTS] },
      to: { path: ["^node_modules/hono/", "^node_modules/@hono/", "^(node:)?http$"] },
    },
    {
      name: "nothing-imports-the-edge",
      severity: "error",
      comment:
        "Imports point inward: domain code returns or throws refusals and src/http/ turns them into statuses, never " +
        "the other way round. Only the composition (src/main.ts, src/app/) wires the edge in.",
      from: { path: "^src/", pathNot: ["^src/http/", "^src/cli/", TESTS, ...COMPOSITION] },
      to: { path: "^src/http/" },
    },
    {
      name: "cli-reads-only-the-admin-wire",
      severity: "error",
      comment:
        "The admin CLI is a client of the admin API: it may know the API's wire types (src/http/admin/wire.ts, " +
        "type-only), nothing else of the server's edge.",
      from: { path: "^src/cli/", pathNot: TESTS },
      to: { path: "^src/http/", pathNot: "^src/http/admin/wire\\.ts$" },
    },
    {
      name: "cli-admin-wire-types-only",
      severity: "error",
      comment:
        "The CLI takes the admin wire's types, never its code (it must not load the server's schemas).",
      from: { path: "^src/cli/", pathNot: TESTS },
      to: { path: "^src/http/admin/wire\\.ts$", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "engine-knows-no-callers",
      severity: "error",
      comment:
        "The engine generates tokens for whoever asks: it never imports tenancy, auth, limits, usage, completions or http.",
      from: { path: "^src/engine/", pathNot: TESTS },
      to: { path: "^src/(tenancy|auth|limits|usage|http|completions)/" },
    },
    {
      name: "refusal-is-dependency-free",
      severity: "error",
      comment:
        "src/refusal.ts is imported by every layer, so it imports nothing (no cycle can pass through it).",
      from: { path: "^src/refusal\\.ts$" },
      to: {},
    },
    {
      name: "src-never-imports-tests",
      severity: "error",
      comment: "Shipped code never loads test code (test/ is not in the package).",
      from: { path: "^src/", pathNot: TESTS },
      to: { path: "^test/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      mainFields: ["module", "main", "types", "typings"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
