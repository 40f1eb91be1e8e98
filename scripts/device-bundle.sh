#!/usr/bin/env bash
# Prepare ./.device/ for a run on a GPU machine (an H200) without network access: the CUDA Tile toolchain and the
# Python wheels the GPU machine lacks (scripts/device-prep.sh), the release build of the generated cdylib (and of the
# Rust API's example and GPU tests), the commit
# it was built from, and the port bundle of tests/gpu/test_record_port.py (scripts/record-port-bundle.sh).
# Everything stays under 64 MiB (checked).
set -euo pipefail
cd "$(dirname "$0")/.."
so=$(python3 -c "from tileport.runtime.library import build; print(build())")
# The Rust API's transformer-block example and its GPU tests (rust-api/), release builds (.device/rustapi.tar.xz):
# scripts/h200.sh rustapi runs them on a machine without Rust.
rustapi=$(mktemp -d)
python3 - "$rustapi" <<'EOS'
import json, shutil, subprocess, sys
from pathlib import Path
from tileport import toolchain
from tileport.runtime.library import cargo_target_dir
env = toolchain.env() | {"CARGO_TARGET_DIR": str(cargo_target_dir())}
cmd = ["cargo", "build", "--release", "--manifest-path", "rust-api/Cargo.toml", "--example", "transformer_block",
       "--test", "gpu", "--message-format=json-render-diagnostics"]
out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
names = {"transformer_block": "transformer_block", "gpu": "tileport_ops_gpu_tests"}
for line in out.splitlines():
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["name"] in names:
        shutil.copy(msg["executable"], Path(sys.argv[1]) / names[msg["target"]["name"]])
EOS
# one archive: the two binaries share most of their bytes (xz: 3.2 MB together, 5.2 MB apart)
tar -C "$rustapi" -cf "$rustapi/rustapi.tar" transformer_block tileport_ops_gpu_tests
bash scripts/device-prep.sh "$so" "$rustapi/rustapi.tar"
rm -rf "$rustapi"
git rev-parse HEAD > .device/COMMIT
bash scripts/record-port-bundle.sh bundle
kib=$(du -sk .device | cut -f1)
echo ".device: $((kib / 1024)) MiB"
if [ "$kib" -gt $((64 * 1024)) ]; then echo "device-bundle: .device is over 64 MiB" >&2; exit 1; fi
