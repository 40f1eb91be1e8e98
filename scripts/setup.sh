#!/usr/bin/env bash
# One command that installs everything tileport needs on a Debian/Ubuntu machine, then checks it:
#   libclang (bindgen, for the cutile crate's CUDA bindings)     - apt, only if missing
#   tileport + the pinned CUDA Tile toolchain wheels (cuda-tile, tileiras, nvvm, nvcc/ptxas, headers) - pip
#   the cutile crate and its dependencies                        - cargo fetch
# Usage: bash scripts/setup.sh        (TILEPORT_PIP="python3 -m pip" by default)
set -euo pipefail
cd "$(dirname "$0")/.."
pip=${TILEPORT_PIP:-python3 -m pip}

if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && [ -z "${LIBCLANG_PATH:-}" ]; then
  echo "== installing libclang-dev (apt)"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libclang-dev >/dev/null
fi

echo "== installing tileport with the CUDA Tile toolchain (pip)"
$pip install -q --disable-pip-version-check -e '.[toolchain,dev,report]'

if [ -f rust/Cargo.toml ]; then
  echo "== fetching crates (cargo)"
  cargo fetch --manifest-path rust/Cargo.toml -q
fi

tileport doctor
