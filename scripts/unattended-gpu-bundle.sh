#!/usr/bin/env bash
# GPU differential of the language-tail construct kernels (tests/wild/data/unattended.py) against cuTile Python,
# on the launches of tests/wild/data/unattended_launches.json:
#   bash scripts/device-bundle.sh                        # the toolchain bundle in .device/ (once)
#   bash scripts/unattended-gpu-bundle.sh                # ports the kernels to B (IR diff, library), packs the crate
#                                                        # (.device/ua-crate/) and its library
#                                                        # (.device/libua_port.so.xz -> $TILEPORT_DEVICE_EXTRA/libua_port.so)
# on the GPU machine (carrying .device):
#   bash .device/enter.sh env TILEPORT_RESULTS_DIR=$OUT python3 -m pytest -q -m gpu tests/wild/test_unattended_gpu.py
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/unattended-gpu-bundle
python3 -m tileport.cli port tests/wild/data/unattended.py --launches tests/wild/data/unattended_launches.json \
  --until B --no-gpu --profile "${PROFILE:-dev}" --out "$out" || true  # kernels without launches stop at A
read -r crate so < <(python3 -c "import json; l = json.load(open('$out/extract_kernel/B/verdict.json'))['details']['library']; print(l['crate'], l['library'])")
rm -rf .device/ua-crate && mkdir -p .device/ua-crate
cp -r "$crate/Cargo.toml" "$crate/kernels.json" "$crate/src" .device/ua-crate/
xz -9 -T2 -c "$so" > .device/libua_port.so.xz
du -sh .device/ua-crate .device/libua_port.so.xz
