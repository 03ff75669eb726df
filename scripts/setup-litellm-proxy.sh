#!/usr/bin/env bash
# Installs LiteLLM's proxy (the gateway bench's comparison, bench/gateway.ts) into a virtualenv of its own outside
# the repo, from the pinned bench/litellm-proxy/requirements.txt, and prints the cache directory as the last line
# of stdout. A finished cache is reused; an interrupted one is started over. The bench runs the proxy with
# LITELLM_LOCAL_MODEL_COST_MAP=True: its cost map comes from the package, never fetched.
#
#   scripts/setup-litellm-proxy.sh [--check]
#
#   --check   install nothing: print the finished cache, or fail when there is none
#
# Cache: ${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/litellm-proxy/<sha256 of the pins and the python version, 12 hex>/
#   venv/    the virtualenv (python3 -m venv), the pins installed with pip --no-deps
#   stamp    written last: a cache is finished when it exists
set -euo pipefail

say() { echo "setup-litellm-proxy: $*" >&2; }
fail() {
  say "error: $*"
  exit 1
}

check_only=false
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    -h | --help)
      sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 0
      ;;
    *) fail "unknown argument: $arg (see --help)" ;;
  esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/bench/litellm-proxy/requirements.txt"
[ -f "$requirements" ] || fail "$requirements not found"
python="${HEARTH_PYTHON:-python3}"
command -v "$python" >/dev/null || fail "$python not found (set HEARTH_PYTHON to a Python 3.11 or newer)"
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
hash="$( (cat "$requirements" && echo "python $py_version") | sha256sum | cut -c 1-12)"
cache="${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/litellm-proxy/$hash"
venv="$cache/venv"

if [ -f "$cache/stamp" ] && [ -x "$venv/bin/litellm" ]; then
  echo "$cache"
  exit 0
fi
if $check_only; then
  fail "no finished LiteLLM proxy in $cache: run scripts/setup-litellm-proxy.sh first"
fi

mkdir -p "$cache"
command -v flock >/dev/null || fail "flock is missing (Debian package util-linux)"
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "another caller holds $cache/lock (an install?); waiting for it"
  flock 9
fi
if [ -f "$cache/stamp" ] && [ -x "$venv/bin/litellm" ]; then
  echo "$cache"
  exit 0
fi

started=$SECONDS
say "creating LiteLLM's proxy venv (Python $py_version) in $cache"
rm -rf "$venv"
"$python" -m venv "$venv" >&2 || fail "python3 -m venv failed (Debian: apt-get install -y python3-venv)"
# --no-deps: the file is the whole resolved set (the proxy extra's own pin names a release that is not published).
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet --no-deps -r "$requirements" >&2
# The smoke test: the proxy's server module imports with its dependencies.
LITELLM_LOCAL_MODEL_COST_MAP=True "$venv/bin/python" -c 'import litellm.proxy.proxy_server, uvicorn, fastapi' >&2 ||
  fail "LiteLLM's proxy does not import"

printf 'python %s\nrequirements sha256 %s\nseconds %s\n' \
  "$py_version" "$(sha256sum "$requirements" | cut -d ' ' -f 1)" "$((SECONDS - started))" >"$cache/stamp.tmp"
mv -f "$cache/stamp.tmp" "$cache/stamp"
say "ready in $((SECONDS - started)) s"
echo "$cache"
