#!/usr/bin/env bash
# Prepare (here, with cargo) and grade (here, afterwards) the Triton corpus run of `scripts/h200.sh triton`:
#   (GPU) bash .device/enter.sh bash scripts/h200.sh triton      # 1st run: records triton-launches.json only
#   bash scripts/triton-bundle.sh bundle DIR/triton-launches.json  # ports the corpus for those launches to B
#                                                     # (tileport port --until B), packs the crate
#                                                     # (.device/triton-crate/), its library
#                                                     # (.device/libtriton_port.so.xz) and the spec
#                                                     # (.device/triton-launches.json)
#   (GPU) bash .device/enter.sh bash scripts/h200.sh triton      # 2nd run: every port vs its Triton kernel
#   bash scripts/triton-bundle.sh grade DIR           # tileport port --launches DIR/triton-launches.json
#                                                     # --gpu-results DIR: stages A-E of every corpus kernel
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
mapfile -t files < <(python3 -c "from tileport.ops.triton_kernels import corpus_files; print(*corpus_files(), sep='\n')")
case "${1:-}" in
  bundle)
    spec=${2:?usage: triton-bundle.sh bundle SPEC}
    out=out/triton-bundle
    python3 -m tileport.cli port "${files[@]}" --launches "$spec" --until B --no-gpu \
      --profile "${PROFILE:-release}" --out "$out" || true  # a kernel that does not reach B is reported below
    read -r crate so < <(python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
libs = {(l["crate"], l["library"]) for v in Path(sys.argv[1]).glob("*/B/verdict.json")
        for l in [json.loads(v.read_text()).get("details", {}).get("library") or {}] if l.get("library")}
if len(libs) != 1:
    sys.exit(f"triton-bundle: expected one batch crate with a library under {sys.argv[1]}/*/B, found {sorted(libs)}")
print(*libs.pop())
PY
)
    mkdir -p .device
    rm -rf .device/triton-crate && mkdir -p .device/triton-crate
    cp -r "$crate/Cargo.toml" "$crate/kernels.json" "$crate/src" .device/triton-crate/
    cp "$spec" .device/triton-launches.json
    xz -9 -T2 -c "$so" > .device/libtriton_port.so.xz
    python3 -c "import json; print(len(json.load(open('.device/triton-crate/kernels.json'))['entries']), 'kernels ported')"
    du -sh .device/triton-crate .device/libtriton_port.so.xz ;;
  grade)
    dir=${2:?usage: triton-bundle.sh grade DIR}
    python3 -m tileport.cli port "${files[@]}" --launches "$dir/triton-launches.json" --gpu-results "$dir" --no-gpu \
      --out out/triton-port ;;
  *) echo "usage: $0 bundle SPEC | grade DIR" >&2; exit 2 ;;
esac
