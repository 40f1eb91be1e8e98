#!/usr/bin/env bash
# Prepare ./.device/ for a run on a GPU machine (an H200) without network access: the CUDA Tile toolchain
# (scripts/device-prep.sh) plus the release build of the generated cdylib and the commit it was built from.
set -euo pipefail
cd "$(dirname "$0")/.."
so=$(python3 -c "from tileport.runtime.library import build; print(build())")
bash scripts/device-prep.sh "$so"
git rev-parse HEAD > .device/COMMIT
du -sh .device
