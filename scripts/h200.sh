#!/usr/bin/env bash
# Runs on a GPU machine (an H200) with the checkout and its .device/ (from `bash scripts/device-bundle.sh`):
#   bash .device/enter.sh bash scripts/h200.sh [check] [bench] [dump] [pytest] [ffi]
# Work happens under /tmp/tileport-out; the few files worth keeping are copied to $OUT at the end
# (at most 8, so that the result to copy back stays small). Each step has its own time limit, and partial results are
# written as they come, so a slow step cannot lose the others.
set -u
steps=${*:-check bench dump}
export TILEPORT_LIB="$TILEPORT_DEVICE_EXTRA/libtileport_kernels.so"
export TILEPORT_COMMIT="$(cat .device/COMMIT 2>/dev/null || echo unknown)"
work=/tmp/tileport-out
mkdir -p "$work"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$work/gpu.txt"
for step in $steps; do
  case $step in
    check)  timeout "${CHECK_TIMEOUT:-300}" python3 -m tileport.cli gpu-check ${CHECK_OPS:-} -j "${JOBS:-12}" \
              --out "$work/check" > "$work/check.log" 2>&1; echo "check rc=$?"; tail -n 30 "$work/check.log"
            cp "$work/check/check.json" "$work/check.json" 2>/dev/null ;;
    bench)  timeout "${BENCH_TIMEOUT:-280}" python3 -m tileport.cli bench ${BENCH_OPS:-} --out "$work/bench.json" \
              --budget "${BUDGET:-0.25}" > "$work/bench.log" 2>&1; echo "bench rc=$?"; tail -n 8 "$work/bench.log" ;;
    dump)   timeout "${DUMP_TIMEOUT:-120}" python3 -m tileport.gpu.dump "$work/bench.json" "$work/ir-dumps" \
              > "$work/dump.log" 2>&1; echo "dump rc=$?"; tail -n 5 "$work/dump.log" ;;
    ffi)    TILEPORT_RESULTS_DIR="$work" timeout "${FFI_TIMEOUT:-540}" python3 -m pytest -q -m gpu -p no:cacheprovider \
              tests/gpu/test_ffi_threads.py > "$work/ffi.log" 2>&1; echo "ffi rc=$?"; tail -n 15 "$work/ffi.log" ;;
    pytest) timeout "${PYTEST_TIMEOUT:-300}" python3 -m pytest -q -m gpu -p no:cacheprovider tests \
              --ignore=tests/gpu/test_ffi_threads.py \
              > "$work/pytest-gpu.log" 2>&1; echo "pytest rc=$?"; tail -n 15 "$work/pytest-gpu.log" ;;
  esac
done
if [ -n "${OUT:-}" ]; then
  for f in gpu.txt check.json check.log bench.json bench.log ir-dumps.tar.gz dump.log pytest-gpu.log ffi-threads.json ffi.log; do
    [ -f "$work/$f" ] && cp "$work/$f" "$OUT/"
  done
fi
