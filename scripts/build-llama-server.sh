#!/usr/bin/env bash
# Builds llama.cpp's own llama-server from the llama.cpp source that the installed node-llama-cpp ships, linked at
# run time to node-llama-cpp's prebuilt libllama/libggml (the same kernels Hearth runs), into a cache outside the
# repo, and prints the binary's path as the last line of stdout. A finished build is reused.
#
#   scripts/build-llama-server.sh [--install-deps]
#
#   --install-deps   apt-get install the build tools (cmake, g++, git) when they are missing
#
# Cache: ${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/llama-server/<node-llama-cpp version>-<bundle sha256, 12 hex>/
#   src/     the bundle's clone, with node-llama-cpp's patches applied (as node-llama-cpp does for its own builds)
#   build/   the cmake build (its own libllama/libggml are only linked against, never loaded)
#   bin/     llama-server, the built libraries the prebuilt set lacks (mtmd), and links to the prebuilt libraries
#   stamp    written last: a build is finished when it exists
# Nothing is downloaded: the source is the package's bundle, the web UI is left out, OpenSSL is off.
set -euo pipefail

say() { echo "build-llama-server: $*" >&2; }
fail() {
  say "error: $*"
  exit 1
}

install_deps=false
for arg in "$@"; do
  case "$arg" in
    --install-deps) install_deps=true ;;
    -h | --help)
      sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 0
      ;;
    *) fail "unknown argument: $arg (see --help)" ;;
  esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
nlc="$root/node_modules/node-llama-cpp"
bundle="$nlc/llama/gitRelease.bundle"
[ -f "$bundle" ] || fail "$bundle not found: run npm install first"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=linux-x64 ;;
  Linux-aarch64) platform=linux-arm64 ;;
  *) fail "no node-llama-cpp prebuilt binaries for $(uname -s) $(uname -m)" ;;
esac
prebuilt="$root/node_modules/@node-llama-cpp/$platform/bins/$platform"
[ -d "$prebuilt" ] || fail "$prebuilt not found: the prebuilt node-llama-cpp libraries are not installed"

version="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$nlc/package.json" | head -n 1)"
[ -n "$version" ] || fail "cannot read node-llama-cpp's version from $nlc/package.json"
bundle_hash="$(sha256sum "$bundle" | cut -c 1-12)"
cache="${HEARTH_CACHE_DIR:-$HOME/.cache/hearth}/llama-server/$version-$bundle_hash"
mkdir -p "$cache"

# One build at a time: a second caller waits here and then finds the stamp.
command -v flock >/dev/null || fail "flock is missing (Debian package util-linux)"
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "another caller holds $cache/lock (a build?); waiting for it"
  flock 9
fi

# The prebuilt library for each library llama-server is linked with, by the linked name (unversioned sonames, as
# node-llama-cpp builds them). mtmd is not in the prebuilt set: the built one is used.
declare -A prebuilt_for=(
  [libllama.so]="$(find "$prebuilt" -maxdepth 1 -name 'libllama.v*.so' | head -n 1)"
  [libggml.so]="$(find "$prebuilt" -maxdepth 1 -name 'libggml.v*.so' | head -n 1)"
  [libggml-base.so]="$prebuilt/libggml-base.so"
  [libllama-common.so]="$prebuilt/libllama-common.so"
)
for name in "${!prebuilt_for[@]}"; do
  [ -f "${prebuilt_for[$name]}" ] || fail "the prebuilt set in $prebuilt lacks a $name"
done

# Points bin/NAME at TARGET, atomically (a running llama-server keeps the file it mapped).
link() {
  local name="$1" target="$2"
  [ "$(readlink "$cache/bin/$name" 2>/dev/null || true)" = "$target" ] && return 0
  ln -sfn "$target" "$cache/bin/.$name.tmp"
  mv -Tf "$cache/bin/.$name.tmp" "$cache/bin/$name"
}

# The links go to this checkout's node_modules (another checkout may share the cache), so they are refreshed on
# every call: every prebuilt library under its own name (libllama-common needs libllama.v*.so by that name; the CPU
# variants are found next to the binary, GGML_BACKEND_DL), then the names llama-server was linked with.
link_prebuilt() {
  local lib name
  for lib in "$prebuilt"/*.so; do
    link "$(basename "$lib")" "$lib"
  done
  for name in "${!prebuilt_for[@]}"; do
    link "$name" "${prebuilt_for[$name]}"
  done
}

if [ -f "$cache/stamp" ] && [ -x "$cache/bin/llama-server" ]; then
  link_prebuilt
  echo "$cache/bin/llama-server"
  exit 0
fi

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v g++ >/dev/null || missing+=(g++)
command -v git >/dev/null || missing+=(git)
if [ "${#missing[@]}" -gt 0 ]; then
  if ! $install_deps; then
    fail "${missing[*]} missing: install them (Debian: apt-get install -y ${missing[*]}) or run with --install-deps"
  fi
  say "installing ${missing[*]}"
  apt-get update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >&2
fi

started=$SECONDS
say "building llama-server from node-llama-cpp $version's llama.cpp source into $cache (several minutes)"

# A clone is complete when its marker exists; an interrupted one is started over.
if [ ! -f "$cache/src.ok" ]; then
  rm -rf "$cache/src"
  git -c advice.detachedHead=false clone --quiet "$bundle" "$cache/src" >&2
  for patch in "$nlc"/llama/patches/*.diff; do
    [ -f "$patch" ] || continue
    if git -C "$cache/src" apply --reverse --check --ignore-whitespace "$patch" 2>/dev/null; then
      say "patch $(basename "$patch") is already in the source"
    elif git -C "$cache/src" apply --ignore-whitespace "$patch"; then
      say "applied node-llama-cpp's patch $(basename "$patch")"
    else
      # node-llama-cpp warns and builds on in this case too; the run-time libraries are the prebuilt ones anyway.
      say "warning: node-llama-cpp's patch $(basename "$patch") does not apply; building without it"
    fi
  done
  touch "$cache/src.ok"
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Shared libraries with unversioned sonames, like node-llama-cpp's build, so the binary's needed libraries have
# prebuilt counterparts. GGML_BACKEND_DL: the CPU backend is a module loaded at run time (node-llama-cpp's prebuilt
# variants, found next to the binary), so none is compiled here (GGML_CPU=OFF: ggml would build every backend
# module it knows). LLAMA_CURL no longer exists in this llama.cpp (cmake ignores it).
cmake -S "$cache/src" -B "$cache/build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
  -DCMAKE_INSTALL_RPATH='$ORIGIN' \
  -DGGML_NATIVE=OFF \
  -DGGML_BACKEND_DL=ON \
  -DGGML_CPU=OFF \
  -DGGML_OPENMP=OFF \
  -DGGML_CCACHE=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_LLGUIDANCE=OFF >&2
cmake --build "$cache/build" --target llama-server -j "$(nproc)" >&2

built="$cache/build/bin"
[ -x "$built/llama-server" ] || fail "the build produced no $built/llama-server"

rm -rf "$cache/bin"
mkdir -p "$cache/bin"
cp "$built/llama-server" "$cache/bin/"
# Every library the binary needs that the prebuilt set does not have (mtmd) is the built one.
for name in $(readelf -d "$built/llama-server" "$built"/*.so | sed -n 's/.*(NEEDED).*\[\(lib[^]]*\)\]/\1/p' | sort -u); do
  if [ -f "$built/$name" ] && [ -z "${prebuilt_for[$name]:-}" ]; then
    cp "$built/$name" "$cache/bin/"
  fi
done
link_prebuilt

# The smoke test of the ABI: the binary starts on the prebuilt libraries.
"$cache/bin/llama-server" --version >&2 || fail "llama-server does not start on the prebuilt libraries"

printf 'node-llama-cpp %s\nbundle sha256 %s\nbuild seconds %s\n' \
  "$version" "$(sha256sum "$bundle" | cut -d ' ' -f 1)" "$((SECONDS - started))" >"$cache/stamp.tmp"
mv -f "$cache/stamp.tmp" "$cache/stamp"
say "built in $((SECONDS - started)) s"
echo "$cache/bin/llama-server"
