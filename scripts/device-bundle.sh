#!/usr/bin/env bash
# Prepare ./.device/ for a run on a GPU machine (an H200) without network access: the CUDA Tile toolchain and the
# Python wheels the GPU machine lacks (scripts/device-prep.sh), the release build of the generated cdylib, the commit
# it was built from, and the port bundle of tests/gpu/test_record_port.py (scripts/record-port-bundle.sh).
# Everything stays under 64 MiB (checked).
set -euo pipefail
cd "$(dirname "$0")/.."
so=$(python3 -c "from tileport.runtime.library import build; print(build())")
bash scripts/device-prep.sh "$so"
git rev-parse HEAD > .device/COMMIT
bash scripts/record-port-bundle.sh bundle
kib=$(du -sk .device | cut -f1)
echo ".device: $((kib / 1024)) MiB"
if [ "$kib" -gt $((64 * 1024)) ]; then echo "device-bundle: .device is over 64 MiB" >&2; exit 1; fi
