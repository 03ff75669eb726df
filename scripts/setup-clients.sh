#!/usr/bin/env bash
# Creates the Python virtualenv of the client-library test tier (test/clients) from the pinned
# test/clients/requirements.txt, into a cache outside the repo, and prints the venv's python as the last line of
# stdout. A finished venv is reused; an interrupted one is started over.
#
#   scripts/setup-clients.sh [--check]
#
#   --check   install nothing: print the finished venv's python, or fail when there is none (the test tier uses
#             this, so nothing is downloaded while tests run)
#
# Cache: ${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/clients/<requirements sha256, 12 hex>/
#   venv/    the virtualenv (python3 -m venv), the requirements installed with pip
#   stamp    written last: a venv is finished when it exists
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
      sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 0
      ;;
    *) fail "unknown argument: $arg (see --help)" ;;
  esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/test/clients/requirements.txt"
[ -f "$requirements" ] || fail "$requirements not found"
python="${HEARTH_PYTHON:-python3}"
command -v "$python" >/dev/null || fail "$python not found (set HEARTH_PYTHON to a Python 3.11 or newer)"

# The interpreter's version is part of the key: a venv is tied to the python it was made with.
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
hash="$( (cat "$requirements" && echo "python $py_version") | sha256sum | cut -c 1-12)"
cache="${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/clients/$hash"
venv_python="$cache/venv/bin/python"

if [ -f "$cache/stamp" ] && [ -x "$venv_python" ]; then
  echo "$venv_python"
  exit 0
fi
if $check_only; then
  fail "no finished client-library venv in $cache: run scripts/setup-clients.sh first"
fi

mkdir -p "$cache"
# One install at a time: a second caller waits here and then finds the stamp.
command -v flock >/dev/null || fail "flock is missing (Debian package util-linux)"
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "another caller holds $cache/lock (an install?); waiting for it"
  flock 9
fi
if [ -f "$cache/stamp" ] && [ -x "$venv_python" ]; then
  echo "$venv_python"
  exit 0
fi

started=$SECONDS
say "creating the client-library venv (Python $py_version) in $cache"
# Whatever a previous, interrupted run left is started over: only the stamp says a venv is whole.
rm -rf "$cache/venv"
"$python" -m venv "$cache/venv" >&2 || fail "python3 -m venv failed (Debian: apt-get install -y python3-venv)"
"$venv_python" -m pip install --disable-pip-version-check --no-input --quiet -r "$requirements" >&2
# The smoke test: every library imports (LiteLLM with its bundled cost map, never fetched).
LITELLM_LOCAL_MODEL_COST_MAP=True "$venv_python" -c 'import openai, langchain_openai, instructor, pydantic_ai, litellm, pydantic' >&2 ||
  fail "the venv's libraries do not import"

printf 'python %s\nrequirements sha256 %s\nseconds %s\n' \
  "$py_version" "$(sha256sum "$requirements" | cut -d ' ' -f 1)" "$((SECONDS - started))" >"$cache/stamp.tmp"
mv -f "$cache/stamp.tmp" "$cache/stamp"
say "ready in $((SECONDS - started)) s"
echo "$venv_python"
