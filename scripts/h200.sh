#!/usr/bin/env bash
# Runs on a GPU machine (an H200) with the checkout and its .device/ (from `bash scripts/device-bundle.sh`):
#   bash .device/enter.sh bash scripts/h200.sh [check] [bench] [dump] [evidence] [pytest] [ffi] [wild] [triton] [liger]
#     [rustapi]
# Work happens under /tmp/tileport-out; the few files worth keeping are copied to $OUT at the end
# (at most 8, so that the result to copy back stays small). Each step has its own time limit, and partial results are
# written as they come, so a slow step cannot lose the others.
#
# evidence: the GPU evidence of stages D and E for every corpus kernel (python -m tileport.pipeline.evidence record):
#   the correctness check of every op on every shape of its spec (one process per op, -j $JOBS) into
#   gpu-evidence-check.json, then the parity benchmark of each corpus kernel's primary op (every dtype, the first
#   $BENCH_SHAPES benchmark shapes, all of them for an op launching several kernels, $BUDGET s per case and column)
#   into gpu-evidence-bench.json. A time limit keeps what finished. Back on the CPU machine
#   `bash scripts/h200-grade.sh DIR` grades them (tileport port --gpu-results DIR) and writes the report.
# pytest: the GPU tests (-m gpu, except the ffi step's), in parallel shards (the op x shape cases one shard per op);
#   $PYTEST_JOBS (8) shards at a time, $PYTEST_TIMEOUT (300) s each; pytest-gpu.json sums up every shard (counts, failures, skip reasons), pytest-gpu.tar.gz holds the junit files,
#   the logs and what the tests wrote. With `evidence` in the same call the shards run beside the correctness
#   check (no timing there), and the benchmark starts when both are over, on an otherwise idle GPU.
# wild: the wild corpus through D and E (python3 -m eval.wild_gpu; the flow is in its docstring; .device/wild
#   from `python3 -m eval.wild_gpu prepare`, then `... bundle DIR`): wild-gpu.json, wild-launches.json,
#   gpu-evidence-launches.json and wild.log. cutile-stencil's generated kernels travel in .device/wild/stencil-gen
#   (eval/wild_drivers/stencil_driver.py launches them; WILD_STENCIL_DOMAINS=all|ends|largest, default ends).
#   WILD_DRIVERS=cutile_gpt,... runs only those packages' drivers.
# triton: the Triton corpus (src/tileport/ops/triton_kernels). Records its launches with `tileport record` of
#   eval/triton_corpus_driver.py (which also checks every corpus kernel against PyTorch: triton-driver.json) into
#   triton-launches.json; when the port bundle of scripts/triton-bundle.sh is in .device/ (triton-crate/,
#   libtriton_port.so.xz, triton-launches.json: the spec the ports were made for), it then runs every corpus port
#   against its source Triton kernel on that spec (python -m tileport.gpu.triton_check: correctness, parity
#   t(cutile-rs)/t(Triton), the cuTile Python op beside unless TRITON_NO_ANCHORS=1) into triton-evidence.json +
#   triton-summary.json (rewritten after every kernel: a time limit keeps what finished).
#   Back here: `bash scripts/triton-bundle.sh grade DIR`.
# liger: Liger-Kernel 0.8.5's Triton kernels (python3 -m eval.wild_triton_gpu; the flow is in its docstring;
#   .device/liger from its `prepare`, then `bundle DIR`). Without a port bundle: eval/wild_drivers/liger_driver.py
#   under `tileport record` (liger-launches.json, liger-driver.json); with one: every bundled port against its Liger
#   kernel on the bundle's launches (correctness in parallel, $LIGER_JOBS kernels at once, then parity serially):
#   liger-gpu.json (rewritten as it goes), liger-evidence.json, liger.log. LIGER_RECORD=1 records despite a bundle.
# rustapi: the Rust API's example (rust-api/examples/transformer_block.rs, built in release by scripts/device-bundle.sh
#   into .device/rustapi.tar.xz: no Rust or network needed here) runs a transformer block on the GPU from Rust
#   alone and checks it against its CPU reference, then the API's GPU tests (rust-api/tests/gpu.rs, every operator
#   against its Rust reference) run: rustapi.log (max error, timings, a JSON summary line, the test results).
#   RUSTAPI_ARGS: the example's batch and sequence length (default 4 512).
set -u
steps=${*:-check bench dump}
export TILEPORT_LIB="$TILEPORT_DEVICE_EXTRA/libtileport_kernels.so"
export TILEPORT_COMMIT="$(cat .device/COMMIT 2>/dev/null || echo unknown)"
work=${TILEPORT_WORK:-/tmp/tileport-out}  # TILEPORT_WORK: another work directory (tests)
mkdir -p "$work"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$work/gpu.txt"
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }

evidence_check() {
  timeout -k 20 "${EVIDENCE_CHECK_TIMEOUT:-240}" python3 -m tileport.pipeline.evidence record --no-bench \
    -j "${JOBS:-16}" --out "$work/evidence" >> "$work/evidence.log" 2>&1
  echo "evidence check rc=$?"; tail -n 2 "$work/evidence.log"
}

evidence_bench() {
  timeout -k 20 "${EVIDENCE_BENCH_TIMEOUT:-180}" python3 -m tileport.pipeline.evidence record --no-check \
    --bench-ops primary --bench-shapes "${BENCH_SHAPES:-1}" --budget "${BUDGET:-0.1}" --out "$work/evidence" \
    >> "$work/evidence.log" 2>&1
  echo "evidence bench rc=$?"; tail -n 2 "$work/evidence.log"
}

pytest_shard() {  # name, pytest arguments... (niced: beside the evidence check, the check comes first)
  local name=$1; shift
  TILEPORT_GPU_REQUIRE=all TILEPORT_RESULTS_DIR="$work/pytest/results/$name" timeout -k 10 "${PYTEST_TIMEOUT:-300}" \
    nice -n 10 python3 -m pytest -q -m gpu -p no:cacheprovider --junitxml="$work/pytest/$name.xml" "$@" \
    > "$work/pytest/$name.log" 2>&1
  echo "$name rc=$?" >> "$work/pytest/rc.txt"
}

throttle() {  # at most $PYTEST_JOBS shards at once: each one JIT-compiles on the CPU, and 30 at once on 16 cores
  # made every shard slow enough to hit its time limit
  while [ "$(jobs -rp | wc -l)" -ge "${PYTEST_JOBS:-8}" ]; do wait -n; done
}

pytest_gpu() {
  rm -rf "$work/pytest" && mkdir -p "$work/pytest"
  local ops op
  ops=$(python3 -c "from tileport.ops import op_names; print(*op_names())") || echo "op-list rc=1" >> "$work/pytest/rc.txt"
  # the long shards first, so that the last ones to start are short
  throttle; pytest_shard rest tests --ignore=tests/gpu/test_ops_gpu.py --ignore=tests/gpu/test_interp_agreement.py \
    --ignore=tests/gpu/test_record_port.py --ignore=tests/gpu/test_ffi_threads.py \
    --ignore=tests/triton_gpu/test_triton_gpu.py &
  throttle; pytest_shard interp-cutile tests/gpu/test_interp_agreement.py -k "not cutile-rs" &
  throttle; pytest_shard interp-cutile-rs tests/gpu/test_interp_agreement.py -k "cutile-rs" &
  throttle; pytest_shard triton tests/triton_gpu/test_triton_gpu.py &
  throttle; pytest_shard record-port tests/gpu/test_record_port.py &
  throttle; pytest_shard ops-other tests/gpu/test_ops_gpu.py -k "not test_op_matches_torch" &
  for op in $ops; do  # ids are <op>-<backend>-<dtype>-<shape>: "<op>-" matches one op only
    throttle; pytest_shard "ops-$op" tests/gpu/test_ops_gpu.py -k "test_op_matches_torch and $op-" &
  done
  wait
  python3 scripts/pytest-summary.py "$work/pytest" "$work/pytest-gpu.json" > "$work/pytest-gpu.log" 2>&1
  echo "pytest rc=$?"; tail -n 25 "$work/pytest-gpu.log"
  tar -C "$work" -czf "$work/pytest-gpu.tar.gz" pytest
}

triton_corpus() {
  local t="$work/triton" spec files
  rm -rf "$t" && mkdir -p "$t"
  timeout -k 10 "${TRITON_RECORD_TIMEOUT:-300}" python3 -m tileport.cli record --out "$t/triton-recorded.json" -- \
    python3 eval/triton_corpus_driver.py --out "$t/triton-driver.json" > "$t/triton.log" 2>&1
  echo "triton record rc=$?"; tail -n 3 "$t/triton.log"
  spec="$t/triton-recorded.json"
  if [ -d .device/triton-crate ] && [ -f .device/triton-launches.json ] \
      && [ -f "$TILEPORT_DEVICE_EXTRA/libtriton_port.so" ]; then
    spec=.device/triton-launches.json  # the launches the bundled ports were made for
    python3 -c "import sys; from tileport.launches import load_spec, records_hash as h
sys.exit(h(load_spec(sys.argv[1])) != h(load_spec(sys.argv[2])))" "$spec" "$t/triton-recorded.json" \
      || echo "triton: the launches recorded now differ from the bundle's (.device/triton-launches.json is tested)"
    files=$(python3 -c "from tileport.ops.triton_kernels import CORPUS; print(*[f'{k.path}::{k.kernel}' for k in CORPUS])")
    timeout -k 10 "${TRITON_CHECK_TIMEOUT:-420}" python3 -m tileport.gpu.triton_check record --spec "$spec" \
      --crate .device/triton-crate --lib "$TILEPORT_DEVICE_EXTRA/libtriton_port.so" --budget "${BUDGET:-0.1}" \
      ${TRITON_NO_ANCHORS:+--no-anchors} --out "$t" $files >> "$t/triton.log" 2>&1
    echo "triton check rc=$?"; tail -n 20 "$t/triton.log"
    cp "$t/gpu-evidence-triton.json" "$work/triton-evidence.json" 2>/dev/null
    cp "$t/triton-summary.json" "$work/" 2>/dev/null
  else
    echo "triton: no port bundle in .device (run scripts/triton-bundle.sh bundle on the CPU machine with the" \
         "triton-launches.json of this run); launches recorded only"
  fi
  cp "$spec" "$work/triton-launches.json"
  cp "$t/triton-driver.json" "$t/triton.log" "$work/" 2>/dev/null
}

for step in $steps; do
  case $step in
    check)  timeout "${CHECK_TIMEOUT:-300}" python3 -m tileport.cli gpu-check ${CHECK_OPS:-} -j "${JOBS:-12}" \
              --out "$work/check" > "$work/check.log" 2>&1; echo "check rc=$?"; tail -n 30 "$work/check.log"
            cp "$work/check/check.json" "$work/check.json" 2>/dev/null ;;
    bench)  timeout "${BENCH_TIMEOUT:-280}" python3 -m tileport.cli bench ${BENCH_OPS:-} --out "$work/bench.json" \
              --budget "${BUDGET:-0.25}" > "$work/bench.log" 2>&1; echo "bench rc=$?"; tail -n 8 "$work/bench.log" ;;
    dump)   timeout "${DUMP_TIMEOUT:-120}" python3 -m tileport.gpu.dump "$work/bench.json" "$work/ir-dumps" \
              > "$work/dump.log" 2>&1; echo "dump rc=$?"; tail -n 5 "$work/dump.log" ;;
    evidence)
            pytest_pid=""
            if has pytest; then pytest_gpu & pytest_pid=$!; fi
            evidence_check
            [ -n "$pytest_pid" ] && wait "$pytest_pid"  # the benchmark times an idle GPU
            evidence_bench
            cp "$work"/evidence/gpu-evidence-*.json "$work/" 2>/dev/null ;;
    ffi)    TILEPORT_RESULTS_DIR="$work" timeout "${FFI_TIMEOUT:-540}" python3 -m pytest -q -m gpu -p no:cacheprovider \
              tests/gpu/test_ffi_threads.py > "$work/ffi.log" 2>&1; echo "ffi rc=$?"; tail -n 15 "$work/ffi.log" ;;
    pytest) has evidence || pytest_gpu ;;  # with evidence, it runs beside the correctness check
    wild)   # the wild corpus's drivers under tileport record, then (with .device/wild from
            # `python3 -m eval.wild_gpu bundle DIR`) the ports against their source kernels: wild-gpu.json
            timeout -k 20 "${WILD_TIMEOUT:-540}" python3 -m eval.wild_gpu device --out "$work/wild" \
              > "$work/wild.log" 2>&1; echo "wild rc=$?"; tail -n 30 "$work/wild.log"
            for f in wild-gpu.json wild-launches.json gpu-evidence-launches.json; do
              cp "$work/wild/$f" "$work/" 2>/dev/null; done ;;
    triton) triton_corpus ;;
    liger)  timeout -k 20 "${LIGER_TIMEOUT:-540}" python3 -m eval.wild_triton_gpu device --out "$work/liger" \
              --timeout "${LIGER_STEP_S:-510}" --jobs "${LIGER_JOBS:-8}" ${LIGER_RECORD:+--record} \
              ${LIGER_PREVIOUS:+--previous "$LIGER_PREVIOUS"} \
              > "$work/liger.log" 2>&1; echo "liger rc=$?"; tail -n 20 "$work/liger.log"
            for f in liger-gpu.json liger-launches.json liger-driver.json liger-evidence.json; do
              cp "$work/liger/$f" "$work/" 2>/dev/null; done ;;
    rustapi) bundle="$TILEPORT_DEVICE_EXTRA/rustapi.tar"
            if [ -f "$bundle" ]; then
              bin="$work/rustapi-bin" && rm -rf "$bin" && mkdir -p "$bin" && tar -C "$bin" -xf "$bundle"
              timeout -k 10 "${RUSTAPI_TIMEOUT:-300}" "$bin/transformer_block" ${RUSTAPI_ARGS:-} \
                > "$work/rustapi.log" 2>&1
              echo "rustapi rc=$?" | tee -a "$work/rustapi.log"; tail -n 20 "$work/rustapi.log"
              # the API's GPU tests (cargo test -- --ignored)
              timeout -k 10 "${RUSTAPI_TESTS_TIMEOUT:-600}" "$bin/tileport_ops_gpu_tests" --ignored --test-threads 1 \
                >> "$work/rustapi.log" 2>&1
              echo "rustapi tests rc=$?" | tee -a "$work/rustapi.log"; tail -n 12 "$work/rustapi.log"
            else
              echo "rustapi: no $bundle (scripts/device-bundle.sh builds it where cargo is installed)" \
                | tee "$work/rustapi.log"
            fi ;;
    *)      echo "unknown step: $step (check bench dump evidence pytest ffi wild triton liger rustapi)" ;;
  esac
done
if [ -n "${OUT:-}" ]; then
  n=0
  for f in gpu.txt rustapi.log liger-gpu.json liger-launches.json liger-driver.json liger-evidence.json liger.log wild-gpu.json wild-launches.json gpu-evidence-launches.json wild.log \
           triton-launches.json triton-evidence.json triton-summary.json triton-driver.json triton.log \
           gpu-evidence-check.json gpu-evidence-bench.json evidence.log pytest-gpu.json pytest-gpu.log \
           pytest-gpu.tar.gz check.json check.log bench.json bench.log ir-dumps.tar.gz dump.log ffi-threads.json ffi.log; do
    [ -f "$work/$f" ] || continue
    n=$((n + 1))
    if [ "$n" -le 8 ]; then cp "$work/$f" "$OUT/"; else echo "not copied to \$OUT (8 files at most): $f"; fi
  done
fi
