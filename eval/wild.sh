#!/usr/bin/env bash
# The wild corpus: download pinned cuTile Python packages from PyPI, find every @ct.kernel (ast only),
# run `tileport translate` and `tileport port --no-gpu` on each with no configuration and no edits, and
# write the table to bench/results/wild.json + wild.md. Third-party sources stay under out/wild
# (git-ignored). Options: --no-port (translate step only, table under out/wild), --work DIR, --results DIR,
# --stencil-gen (opt-in: install cutile-stencil==0.3.0 and its dependencies in a venv under the work directory,
# run the package's own compile path on the CPU on its benchmark stencils, and port the files it emits: a
# section of its own in the table).
# --triton (first argument): the Triton wild set instead (eval.wild_triton: Liger-Kernel, every @triton.jit,
# translate only; bench/results/wild-triton.json + .md; --wheel-dir DIR takes the pinned wheel from DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "--triton" ]; then shift; exec nice python3 -m eval.wild_triton "$@"; fi
exec nice python3 -m eval.wild "$@"
