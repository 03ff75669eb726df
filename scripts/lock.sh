#!/usr/bin/env bash
# Writes package-lock.json so that `npm ci` accepts it on a fresh machine, keeping the versions already locked.
# Re-run it after any change to package.json's dependencies (a merge that adds one, a conflict in the lock).
#
#   scripts/lock.sh        (or `npm run lock`)
#
# 0. A lock with git conflict markers (a merge of two branches that both added dependencies; resolve package.json
#    first) is replaced by our side's (git's stage 2): step 1 then adds what package.json gained from the other
#    side. npm's own conflict resolution re-resolves far more (it moved @electric-sql/pglite and 40 others).
# 1. `npm install --package-lock-only` from the current lock: npm's own resolution. Locked versions stay; what
#    package.json added or dropped is applied. No node_modules is read or written, and no registry address is
#    written into the lock (whatever ~/.npmrc says).
# 2. An entry for each optional dependency that the registry cannot supply at the exact version its dependant asks
#    for (node-llama-cpp 3.22.1 asks for @node-llama-cpp/mac-x64@3.22.1, win-*, linux-riscv64, which the registry
#    these machines reach does not have). npm drops such a dependency from the lock it writes, then `npm ci`
#    tries it again, fails again, and refuses that very lock ("Missing: @node-llama-cpp/mac-x64@ from lock file",
#    npm/cli#9846, open). The entry names the version asked for, optional, with the package's os/cpu/libc (from
#    the newest version the registry has), so `npm ci` has nothing to resolve and skips it on other platforms;
#    on the platform it is for, its fetch fails and npm skips it as it skips any failed optional dependency.
#    Only an exact version the registry does not list gets an entry: anything else stops the script.
# 3. `npm install --package-lock-only` again, so npm writes the result in its own order and flags.
# 4. `npm ci --dry-run`: the check that `npm ci` accepts the lock; then the locked versions that changed (against
#    the lock before the run, and in a merge against the other side's), and the lowest Node the runtime
#    dependencies accept (for engines.node).
set -euo pipefail

say() { echo "lock: $*" >&2; }
fail() {
  say "error: $*"
  exit 1
}

case "${1:-}" in
  "") ;;
  -h | --help)
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 0
    ;;
  *) fail "unknown argument: $1 (see --help)" ;;
esac

cd "$(dirname "$0")/.."
[ -f package.json ] || fail "no package.json in $(pwd)"

# The same flags on every npm call: no audit or funding chatter, no registry address in the lock.
npm_flags=(--no-audit --no-fund --omit-lockfile-registry-resolved)

before="$(mktemp)"
theirs="$(mktemp)"
trap 'rm -f "$before" "$theirs"' EXIT
echo '{}' >"$theirs"
if grep -q '^<<<<<<< ' package.json; then fail "package.json has conflict markers: resolve them first"; fi
if [ -f package-lock.json ] && grep -q '^<<<<<<< ' package-lock.json; then
  git show :2:package-lock.json >"$before" 2>/dev/null ||
    fail "package-lock.json has conflict markers and git has no version of our side (stage 2) to start from"
  git show :3:package-lock.json >"$theirs" 2>/dev/null || true
  cp "$before" package-lock.json
  say "0/4 package-lock.json had conflict markers: starting from our side's lock (git stage 2)"
elif [ -f package-lock.json ]; then
  cp package-lock.json "$before"
else
  echo '{}' >"$before"
fi

say "1/4 npm install --package-lock-only (locked versions kept)"
npm install --package-lock-only --ignore-scripts "${npm_flags[@]}" >&2

say "2/4 entries for optional dependencies the registry does not have"
node --input-type=module - package-lock.json <<'EOF'
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const file = process.argv[2];
const lock = JSON.parse(readFileSync(file, "utf8"));
const packages = lock.packages;
const EXACT = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/;

/** The lock location Node would load `name` from for the package at `from` ("" is the root), or null. */
function resolve(from, name) {
  let dir = from;
  for (;;) {
    const at = dir === "" ? `node_modules/${name}` : `${dir}/node_modules/${name}`;
    if (packages[at] !== undefined) return at;
    if (dir === "") return null;
    const parent = dir.lastIndexOf("/node_modules/");
    dir = parent < 0 ? "" : dir.slice(0, parent);
  }
}

function registryView(name) {
  try {
    const out = execFileSync("npm", ["view", name, "versions", "os", "cpu", "libc", "license", "engines", "--json"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    return JSON.parse(out);
  } catch (error) {
    if (/E404/.test(String(error.stderr ?? ""))) return null;
    throw error;
  }
}

const missing = [];
for (const [from, meta] of Object.entries(packages)) {
  for (const [name, spec] of Object.entries(meta.optionalDependencies ?? {})) {
    if (resolve(from, name) === null) missing.push({ from, name, spec, dev: meta.dev === true });
  }
}
const problems = [];
for (const { from, name, spec, dev } of missing) {
  const by = from === "" ? "package.json" : from.replace(/^.*node_modules\//, "");
  if (!EXACT.test(spec)) {
    problems.push(`${by} wants ${name}@${spec}, which the registry cannot satisfy; not an exact version: no entry`);
    continue;
  }
  const view = registryView(name);
  const versions = view === null ? [] : [view.versions].flat();
  if (versions.includes(spec)) {
    problems.push(`the registry has ${name}@${spec} (wanted by ${by}) yet npm left it out: a network fault? run again`);
    continue;
  }
  const at = packages[`node_modules/${name}`] === undefined ? `node_modules/${name}` : `${from}/node_modules/${name}`;
  const entry = { version: spec };
  for (const key of ["cpu", "libc", "license"]) if (view?.[key] !== undefined) entry[key] = view[key];
  if (dev) entry.dev = true;
  entry.optional = true;
  for (const key of ["os", "engines"]) if (view?.[key] !== undefined) entry[key] = view[key];
  packages[at] = entry;
  const platform =
    view?.os === undefined ? "os unknown: every platform will try it" : `${[view.os].flat()}/${[view.cpu].flat()}`;
  console.error(`lock:   ${at}@${spec} (wanted by ${by}; not in the registry; ${platform})`);
}
if (missing.length === 0) console.error("lock:   none missing");
if (problems.length > 0) {
  for (const problem of problems) console.error(`lock: error: ${problem}`);
  process.exit(1);
}
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
EOF

say "3/4 npm install --package-lock-only (npm's own order and flags)"
npm install --package-lock-only --ignore-scripts "${npm_flags[@]}" >&2

say "4/4 npm ci --dry-run (does npm ci accept the lock?)"
npm ci --dry-run --ignore-scripts "${npm_flags[@]}" >/dev/null

node --input-type=module - "$before" "$theirs" package-lock.json package.json <<'EOF'
import { readFileSync } from "node:fs";

const [beforeFile, theirsFile, afterFile, manifestFile] = process.argv.slice(2);
const read = (file) => JSON.parse(readFileSync(file, "utf8"));
const versions = (lock) =>
  new Map(Object.entries(lock.packages ?? {}).filter(([at]) => at !== "").map(([at, meta]) => [at, meta.version]));
const after = versions(read(afterFile));

/** What this run changed against a lock: entries added and removed, and (the ones to read) versions changed. */
function report(label, base, { listMoves }) {
  const added = [...after.keys()].filter((at) => !base.has(at));
  const removed = [...base.keys()].filter((at) => !after.has(at));
  const changed = [...base.keys()].filter((at) => after.has(at) && after.get(at) !== base.get(at));
  const counts = `versions changed ${changed.length}, entries added ${added.length}, removed ${removed.length}`;
  console.error(`lock: against ${label}: ${counts}`);
  for (const at of changed.sort()) console.error(`  changed ${at}: ${base.get(at)} -> ${after.get(at)}`);
  if (!listMoves) return;
  for (const at of removed.sort()) console.error(`  removed ${at}@${base.get(at)}`);
  if (added.length <= 30) for (const at of added.sort()) console.error(`  added ${at}@${after.get(at)}`);
}
report("the lock before this run", versions(read(beforeFile)), { listMoves: true });
const theirs = versions(read(theirsFile));
// The other side's nested copies may be hoisted or deduplicated: only its changed versions are worth reading.
if (theirs.size > 0) report("the other side of the merge", theirs, { listMoves: false });

// The lowest Node version every runtime (non-dev) dependency accepts: the highest of their lower bounds.
const lowerBound = (range) =>
  range
    .split("||")
    .map((alternative) => (alternative.match(/\d+(?:\.(?:\d+|[x*]))?(?:\.(?:\d+|[x*]))?/) ?? ["0"])[0])
    .map((version) => version.split(".").map((part) => Number.parseInt(part, 10) || 0))
    .map(([major = 0, minor = 0, patch = 0]) => [major, minor, patch])
    .sort(compare)[0];
function compare(a, b) {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}
let need = [0, 0, 0];
let needBy = "";
for (const [at, meta] of Object.entries(read(afterFile).packages ?? {})) {
  const range = meta.engines?.node;
  if (at === "" || meta.dev === true || typeof range !== "string") continue;
  const bound = lowerBound(range);
  if (compare(bound, need) > 0) [need, needBy] = [bound, `${at.replace(/^.*node_modules\//, "")} ${range}`];
}
const declared = read(manifestFile).engines?.node ?? "";
console.error(`lock: runtime dependencies need node >= ${need.join(".")} (${needBy}); engines.node is "${declared}"`);
if (compare(lowerBound(declared), need) < 0) {
  console.error(`lock: warning: engines.node allows a node older than ${need.join(".")}: raise it`);
}
EOF
