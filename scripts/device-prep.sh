#!/usr/bin/env bash
# Prepare ./.device/ in the current checkout for runs on a GPU machine without network access.
# It packs, from PyPI wheels, the CUDA Tile toolchain that an H200 (sm_90) needs at run time:
#   tileiras 13.4 (+ its libnvvm and a matching ptxas; tileirdisasm stays on the CPU side), the cuda-tile
#   (cuTile Python) wheel for Python 3.12 and the wheels of jsonschema and its dependencies.
# The packed toolchain is ~55 MiB (xz with a dictionary larger than tileiras saves 2 MB); keep what else you carry
# small (files given as arguments are xz-compressed
# into .device/).
#
# Usage (from the project root):   bash scripts/device-prep.sh [extra files to xz into .device/ ...]
#   (scripts/device-bundle.sh calls it with the release build of the generated cdylib)
# Then, on the GPU machine, with .device/ copied beside the checkout, run a command such as:
#   bash .device/enter.sh python3 -m pytest -m gpu tests/
# .device/enter.sh unpacks everything under /tmp on the GPU machine, sets PATH/PYTHONPATH and runs the command.
# Downloads are cached in $TILEPORT_DEVICE_CACHE (default ~/.cache/tileport-device).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cache=${TILEPORT_DEVICE_CACHE:-$HOME/.cache/tileport-device}
mkdir -p "$cache" "$root/.device"
pyplat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
        --platform manylinux2010_x86_64 --platform manylinux_2_12_x86_64)
CUDA_TILE_VERSION=${CUDA_TILE_VERSION:-1.7.0}
CU_VERSION=${CU_VERSION:-13.4.92}
if [ ! -s "$cache/toolchain-$CU_VERSION-v3.tar.xz" ]; then
  w=$(mktemp -d)
  python3 -m pip download -q --no-deps "${pyplat[@]}" -d "$w" \
    "nvidia-cuda-tileiras==$CU_VERSION" "nvidia-nvvm==$CU_VERSION" "nvidia-cuda-nvcc==$CU_VERSION"
  x=$(mktemp -d)
  for f in "$w"/*.whl; do python3 -m zipfile -e "$f" "$x"; done
  chmod +x "$x"/nvidia/cu13/bin/* 
  ( cd "$x" && tar -cf - nvidia/cu13/bin/tileiras nvidia/cu13/bin/ptxas nvidia/cu13/lib/libnvvm.so.4 ) \
    | xz -9e -T1 --lzma2=preset=9e,dict=256MiB > "$cache/toolchain-$CU_VERSION-v3.tar.xz.part"
  mv "$cache/toolchain-$CU_VERSION-v3.tar.xz.part" "$cache/toolchain-$CU_VERSION-v3.tar.xz"
  rm -rf "$w" "$x"
fi
cp "$cache/toolchain-$CU_VERSION-v3.tar.xz" "$root/.device/toolchain.tar.xz"
# Wheels for the GPU machine's Python 3.12: cuda-tile, and jsonschema with its dependencies (tileport validates
# launch specs, verdicts and reports with it; that Python has none of them). Downloaded once into the cache.
wheels=("cuda-tile==$CUDA_TILE_VERSION" jsonschema==4.26.0 referencing==0.37.0 rpds-py==0.30.0
        jsonschema-specifications==2025.9.1 attrs==25.4.0)
mkdir -p "$cache/wheels-cp312"
python3 -m pip download -q --no-deps "${pyplat[@]}" -d "$cache/wheels-cp312" "${wheels[@]}"
rm -f "$root"/.device/*.whl
for w in "${wheels[@]}"; do
  name=${w%%==*}; version=${w#*==}
  f=$(ls "$cache/wheels-cp312/${name//-/_}-$version-"*.whl 2>/dev/null | head -n 1)
  [ -n "$f" ] || { echo "device-prep: no wheel for $w in $cache/wheels-cp312" >&2; exit 1; }
  cp "$f" "$root/.device/"
done
for f in "$@"; do xz -9 -T2 -c "$f" > "$root/.device/$(basename "$f").xz"; done
cat > "$root/.device/enter.sh" <<'EOS'
#!/usr/bin/env bash
# Runs on the GPU machine: unpack the toolchain and extras, set the environment, run "$@".
set -e
d=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/tp-tools /tmp/tp-site /tmp/tp-extra
[ -x /tmp/tp-tools/nvidia/cu13/bin/tileiras ] || tar -C /tmp/tp-tools -xJf "$d/toolchain.tar.xz"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/tp-site "$d"/*.whl
for f in "$d"/*.xz; do case "$f" in *toolchain.tar.xz) ;; *) xz -dc "$f" > "/tmp/tp-extra/$(basename "${f%.xz}")";; esac; done
unset CUDA_HOME CUDA_PATH   # else tileiras may pick the image's older CUDA 13.0 ptxas
export PATH=/tmp/tp-tools/nvidia/cu13/bin:$PATH
export PYTHONPATH=/tmp/tp-site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export TILEPORT_DEVICE_EXTRA=/tmp/tp-extra CUTILE_TILEIRAS_PATH=/tmp/tp-tools/nvidia/cu13/bin/tileiras
export PYTHONUNBUFFERED=1
# the commit the bundle was made for (scripts/device-bundle.sh writes it): the GPU machine's copy of the tree
# need not carry the git history that `git rev-parse HEAD` would read
if [ -z "${TILEPORT_COMMIT:-}" ] && [ -s "$d/COMMIT" ]; then export TILEPORT_COMMIT=$(cat "$d/COMMIT"); fi
exec "$@"
EOS
chmod +x "$root/.device/enter.sh"
du -sh "$root/.device"; ls -la "$root/.device"
