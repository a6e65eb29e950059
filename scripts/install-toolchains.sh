#!/usr/bin/env bash
# Installs, from Debian's packages, everything the tests need beyond npm:
# the Python, Go and Clojure toolchains, their JSON Patch libraries (the
# witnesses), the web servers the middleware tests run (uvicorn, Jetty) and
# the browser for the page tests. Without it, `npm test` reports those suites
# as SKIPPED (under CI=true it fails them instead). Idempotent; needs root or
# sudo. `.ci/run` calls it; run it once by hand on a fresh machine.
set -euo pipefail

if [ "$(id -u)" = 0 ]; then apt=(apt-get); else apt=(sudo apt-get); fi

packages=(
  # Python: the client, its tests, its wheel, the witness and the web stacks
  python3-jsonpatch python3-pytest python3-pytest-asyncio python3-setuptools python3-wheel python3-venv
  python3-starlette python3-fastapi python3-uvicorn python3-httpx
  # Go: the toolchain and the evanphx/json-patch witness
  golang-go golang-github-evanphx-json-patch-dev
  # Clojure: the toolchain, data.json, Ring and its Jetty adapter
  clojure libdata-json-clojure libring-core-clojure libring-jetty-adapter-clojure
  # readelf, for the glibc floor the release reads off the binary
  binutils
  # the README's examples (test/readme/) call the servers they start with curl
  curl
  # resume on Redis (protocol/README.md §16): the tests start their own redis-server on a free port
  redis-server
  # the release's other targets (test/release/targets.ts): linux-arm64 runs under qemu with
  # Debian's arm64 libc and libstdc++ (multiarch, added below); win-x64 runs under Debian 13's
  # wine64 in a root debootstrap makes (Debian 12's wine 8.0 cannot start Node 26)
  qemu-user-static libc6:arm64 libstdc++6:arm64
  # the release: libatomic, which Node 26's Linux binaries need and a slim image lacks, is vendored
  # from Debian's packages (both architectures) and named by a RUNPATH patchelf sets
  # (scripts/linux-libs.mjs); debootstrap makes the slim image's files the tests run them in
  patchelf libatomic1 libatomic1:arm64 debootstrap
  # the browser the page tests drive
  chromium
)

# arm64 packages (libc6:arm64, libstdc++6:arm64, libatomic1:arm64) come from Debian's own archive once the
# architecture is added; a no-op when it already is.
if [ "$(id -u)" = 0 ]; then dpkg=(dpkg); else dpkg=(sudo dpkg); fi
dpkg --print-foreign-architectures | grep -qx arm64 || "${dpkg[@]}" --add-architecture arm64
"${apt[@]}" update -qq
DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq "${packages[@]}"
