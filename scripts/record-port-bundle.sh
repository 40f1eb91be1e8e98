#!/usr/bin/env bash
# Prepare (here, with cargo) and grade (here, afterwards) the GPU run of tests/gpu/test_record_port.py:
#   bash scripts/device-bundle.sh                     # the toolchain bundle in .device/ (once)
#   bash scripts/record-port-bundle.sh bundle         # ports the test kernels to B with their expected launches,
#                                                     # packs the crate (.device/rp-crate/) and its library
#                                                     # (.device/librp_port.so.xz -> $TILEPORT_DEVICE_EXTRA/librp_port.so)
# on the GPU machine (carrying .device):
#   bash .device/enter.sh env TILEPORT_RESULTS_DIR=$OUT python3 -m pytest -q -m gpu tests/gpu/test_record_port.py
# back here, with the fetched results directory:
#   bash scripts/record-port-bundle.sh grade DIR      # tileport port --launches DIR/launches.json --gpu-results DIR
set -euo pipefail
cd "$(dirname "$0")/.."
files=(tests/pipeline/data/rp_scale.py tests/pipeline/data/rp_rowsum.py tests/pipeline/data/rp_take.py)
case "${1:-}" in
  bundle)
    out=out/record-port-bundle
    python3 -m tileport.cli port "${files[@]}" --launches tests/pipeline/data/rp_launches.json --until B --no-gpu \
      --profile "${PROFILE:-release}" --out "$out"
    read -r crate so < <(python3 -c "import json; l = json.load(open('$out/scale_kernel/B/verdict.json'))['details']['library']; print(l['crate'], l['library'])")
    rm -rf .device/rp-crate && mkdir -p .device/rp-crate
    cp -r "$crate/Cargo.toml" "$crate/kernels.json" "$crate/src" .device/rp-crate/
    xz -9 -T2 -c "$so" > .device/librp_port.so.xz
    du -sh .device/rp-crate .device/librp_port.so.xz ;;
  grade)
    dir=${2:?usage: record-port-bundle.sh grade DIR}
    python3 -m tileport.cli port "${files[@]}" --launches "$dir/launches.json" --gpu-results "$dir" --no-gpu \
      --out out/record-port ;;
  *) echo "usage: $0 bundle | grade DIR" >&2; exit 2 ;;
esac
