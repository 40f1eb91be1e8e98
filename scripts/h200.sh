#!/usr/bin/env bash
# Runs on the lent H200 (through the device tool, after `bash scripts/device-bundle.sh`):
#   bash .device/enter.sh bash scripts/h200.sh [check] [bench] [pytest]
# Results go to $OUT (check/*.json, bench.json, logs). Each step has its own time limit so a slow
# step cannot eat the whole call; partial results are written as they come.
set -u
steps=${*:-check bench}
export TILEPORT_LIB="$TILEPORT_DEVICE_EXTRA/libtileport_kernels.so"
export TILEPORT_COMMIT="$(cat .device/COMMIT 2>/dev/null || echo unknown)"
export OUT=${OUT:-/tmp/tileport-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
for step in $steps; do
  case $step in
    check)  timeout "${CHECK_TIMEOUT:-300}" python3 -m tileport.cli gpu-check -j "${JOBS:-12}" --out "$OUT/check" \
              > "$OUT/check.log" 2>&1; echo "check rc=$?"; tail -n 45 "$OUT/check.log" ;;
    bench)  timeout "${BENCH_TIMEOUT:-280}" python3 -m tileport.cli bench ${BENCH_OPS:-} --out "$OUT/bench.json" \
              --budget "${BUDGET:-0.25}" > "$OUT/bench.log" 2>&1; echo "bench rc=$?"; tail -n 8 "$OUT/bench.log" ;;
    pytest) timeout "${PYTEST_TIMEOUT:-300}" python3 -m pytest -q -m gpu -p no:cacheprovider tests \
              > "$OUT/pytest-gpu.log" 2>&1; echo "pytest rc=$?"; tail -n 15 "$OUT/pytest-gpu.log" ;;
  esac
done
