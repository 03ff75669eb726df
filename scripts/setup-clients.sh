#!/usr/bin/env bash
# Installs the clients of the client test tier (test/clients) into a cache outside the repo: the Python libraries of
# the pinned test/clients/requirements.txt into a virtualenv, and the pinned command-line clients of
# test/clients/npm-tools.txt (Codex CLI) with npm. Prints the cache directory as the last line of stdout. A finished
# cache is reused; an interrupted one is started over.
#
#   scripts/setup-clients.sh [--check]
#
#   --check   install nothing: print the finished cache, or fail when there is none (.ci/run makes the cache
#             before the tests, so the tier's own call only ever finds it: nothing is downloaded while tests run)
#
# Cache: ${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/clients/<sha256 of both pin files and the python version, 12 hex>/
#   venv/    the virtualenv (python3 -m venv), the requirements installed with pip
#   npm/     npm install --prefix of each npm-tools.txt line (node_modules/.bin/codex, ...)
#   stamp    written last: a cache is finished when it exists
set -euo pipefail

say() { echo "setup-clients: $*" >&2; }
fail() {
  say "error: $*"
  exit 1
}

check_only=false
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    -h | --help)
      sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 0
      ;;
    *) fail "unknown argument: $arg (see --help)" ;;
  esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/test/clients/requirements.txt"
npm_tools="$root/test/clients/npm-tools.txt"
[ -f "$requirements" ] || fail "$requirements not found"
[ -f "$npm_tools" ] || fail "$npm_tools not found"
python="${HEARTH_PYTHON:-python3}"
command -v "$python" >/dev/null || fail "$python not found (set HEARTH_PYTHON to a Python 3.11 or newer)"

# The npm tools, one package@version a line (comments and blank lines left out).
mapfile -t tools < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$npm_tools" | grep -v '^$' || true)
for tool in "${tools[@]}"; do
  [[ "$tool" =~ ^(@[a-z0-9._-]+/)?[a-z0-9._-]+@[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] ||
    fail "$npm_tools: '$tool' is not a package@exact-version"
done

# The interpreter's version is part of the key: a venv is tied to the python it was made with.
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
hash="$( (cat "$requirements" "$npm_tools" && echo "python $py_version") | sha256sum | cut -c 1-12)"
cache="${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/clients/$hash"
venv_python="$cache/venv/bin/python"

if [ -f "$cache/stamp" ] && [ -x "$venv_python" ]; then
  echo "$cache"
  exit 0
fi
if $check_only; then
  fail "no finished client cache in $cache: run scripts/setup-clients.sh first"
fi
command -v npm >/dev/null || fail "npm not found"

mkdir -p "$cache"
# One install at a time: a second caller waits here and then finds the stamp.
command -v flock >/dev/null || fail "flock is missing (Debian package util-linux)"
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "another caller holds $cache/lock (an install?); waiting for it"
  flock 9
fi
if [ -f "$cache/stamp" ] && [ -x "$venv_python" ]; then
  echo "$cache"
  exit 0
fi

started=$SECONDS
say "creating the client-library venv (Python $py_version) in $cache"
# Whatever a previous, interrupted run left is started over: only the stamp says a venv is whole.
rm -rf "$cache/venv"
"$python" -m venv "$cache/venv" >&2 || fail "python3 -m venv failed (Debian: apt-get install -y python3-venv)"
"$venv_python" -m pip install --disable-pip-version-check --no-input --quiet -r "$requirements" >&2
# The smoke test: every library imports (LiteLLM with its bundled cost map, never fetched).
LITELLM_LOCAL_MODEL_COST_MAP=True "$venv_python" -c \
  'import openai, langchain_openai, instructor, pydantic_ai, litellm, pydantic, agents, openresponses_types' >&2 ||
  fail "the venv's libraries do not import"

# The npm tools with their own dependencies (Codex's is the native binary of this platform, as a package).
say "installing ${tools[*]} into $cache/npm"
rm -rf "$cache/npm"
mkdir -p "$cache/npm"
# One install of them all: npm keeps them in npm/package.json, at the exact versions given.
npm install --prefix "$cache/npm" --save-exact --no-audit --no-fund --loglevel=error "${tools[@]}" >&2 ||
  fail "npm install ${tools[*]} failed"
# The smoke test: Codex runs (its native binary for this platform came with it).
"$cache/npm/node_modules/.bin/codex" --version >&2 || fail "codex does not run"

printf 'python %s\nrequirements sha256 %s\nnpm tools %s\nseconds %s\n' \
  "$py_version" "$(sha256sum "$requirements" | cut -d ' ' -f 1)" "${tools[*]}" "$((SECONDS - started))" \
  >"$cache/stamp.tmp"
mv -f "$cache/stamp.tmp" "$cache/stamp"
say "ready in $((SECONDS - started)) s"
echo "$cache"
