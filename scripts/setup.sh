#!/usr/bin/env bash
# One command that installs everything tileport needs on a Debian/Ubuntu machine, then checks it:
#   libclang (bindgen, for the cutile crate's CUDA bindings)     - apt, only if no loadable libclang.so
#   Rust (cargo, rustc, rustfmt)                                  - rustup, only if cargo is missing
#   tileport + the pinned CUDA Tile toolchain wheels (cuda-tile, tileiras, nvvm, nvcc/ptxas, headers) and the
#     pinned Ray of `--executor ray` (the extra `ray`)                                               - pip,
#     into a project virtual environment .venv when the system Python refuses pip installs (PEP 668)
#   the cutile crate and its dependencies                        - cargo fetch
# Usage: bash scripts/setup.sh        (TILEPORT_PYTHON=python3 by default)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=.venv

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# A libclang that bindgen can load (libclang.so / libclang-N.so, not libclang-cpp.so): the check of
# `tileport doctor` (tileport/toolchain.py needs only the standard library, so it runs before pip).
has_libclang() {
  PYTHONPATH="$REPO/src" "${TILEPORT_PYTHON:-python3}" -c \
    'import sys; from tileport.toolchain import libclang; sys.exit(0 if libclang() else 1)'
}

# PEP 668: pip refuses to install into a distribution's Python outside a virtual environment.
externally_managed() {
  "$1" -c 'import os, sys, sysconfig
inside_venv = sys.prefix != sys.base_prefix
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if not inside_venv and os.path.isfile(marker) else 1)'
}

# The Python tileport is installed into (printed): .venv if it exists or the system Python is
# externally managed, else the given Python.
choose_python() {
  local py=${TILEPORT_PYTHON:-python3}
  if [ -x "$VENV/bin/python" ]; then
    echo "$VENV/bin/python"
    return
  fi
  if externally_managed "$py"; then
    echo "== $py is externally managed (PEP 668): creating the project virtual environment $VENV" >&2
    if ! "$py" -m venv "$VENV" >&2; then
      echo "== installing python3-venv (apt)" >&2
      apt_install python3-venv >&2
      "$py" -m venv "$VENV" >&2
    fi
    echo "$VENV/bin/python"
    return
  fi
  echo "$py"
}

# cargo/rustc: rustup when they are missing and sh.rustup.rs is reachable, else say what to do.
ensure_rust() {
  if command -v cargo >/dev/null 2>&1; then return 0; fi
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
    return 0
  fi
  local installer
  installer=$(mktemp)
  if curl -sSf --max-time 20 https://sh.rustup.rs -o "$installer"; then
    echo "== cargo/rustc not found: installing Rust with rustup into ~/.cargo (add it to PATH: . ~/.cargo/env)"
    sh "$installer" -y -q --profile minimal -c rustfmt
    rm -f "$installer"
    export PATH="$HOME/.cargo/bin:$PATH"
    return 0
  fi
  rm -f "$installer"
  echo "== cargo/rustc not found and https://sh.rustup.rs is unreachable: install Rust >= 1.89 with rustfmt" \
       "(https://rustup.rs), put cargo on PATH, then run this script again" >&2
  return 1
}

main() {
  cd "$REPO"
  if ! has_libclang; then
    echo "== installing libclang-dev (apt): no loadable libclang.so for bindgen"
    apt_install libclang-dev
  fi
  local rust_ok=1
  ensure_rust || rust_ok=0

  local py
  py=$(choose_python)
  echo "== installing tileport with the CUDA Tile toolchain (pip, into $("$py" -c 'import sys; print(sys.prefix)'))"
  "$py" -m pip install -q --disable-pip-version-check -e '.[toolchain,dev,report,ray]'

  if [ "$rust_ok" = 1 ] && [ -f rust/Cargo.toml ]; then
    echo "== fetching crates (cargo)"
    cargo fetch --manifest-path rust/Cargo.toml -q
  fi

  if [ "$py" = "$VENV/bin/python" ]; then
    echo "== tileport is installed in $VENV: run 'source $VENV/bin/activate' before the README's commands"
  fi
  "$py" -m tileport.cli doctor
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
