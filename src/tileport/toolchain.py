"""Locate every component of the CUDA Tile + cutile-rs toolchain and say how to fix what is missing.

Everything is discovered, nothing is assumed: the PyPI wheels' `nvidia/cu13` tree (tileiras,
tileirdisasm, ptxas, libnvvm, CUDA headers), cuTile Python, libclang for bindgen, cargo/rustc and the
pinned `cutile` crate. `tileport doctor` prints the result; the build and capture code use `env()`.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool

SETUP_COMMAND = "bash scripts/setup.sh"
CUTILE_CRATE_VERSION = "0.5.0"
CUDA_TILE_VERSION = "1.7.0"
TILEIRAS_RELEASE = "13.4"
MIN_CUDA_HEADER_VERSION = 13020  # cuda-bindings rejects older cuda.h
MIN_RUST = (1, 89)
# GPU targets of tileiras 13.4 (`tileiras --help`, --gpu-name): what --target may name.
TILE_TARGETS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107", "sm_110",
                "sm_120", "sm_121")


@dataclass(frozen=True)
class Component:
    name: str
    ok: bool
    version: str = ""
    path: str = ""
    fix: str = ""
    required: bool = True


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess | None:
    try:
        return run_tool(cmd, 60, **kw)
    except (OSError, ToolTimeout):
        return None


@functools.cache
def cu13_root() -> Path | None:
    """The `nvidia/cu13` directory laid out by the PyPI CUDA wheels (bin/, include/, lib/)."""
    spec = importlib.util.find_spec("nvidia")
    for base in list(spec.submodule_search_locations or []) if spec else []:
        root = Path(base) / "cu13"
        if root.is_dir():
            return root
    return None


def _bin(name: str) -> Path | None:
    root = cu13_root()
    if root and (root / "bin" / name).is_file():
        return root / "bin" / name
    found = shutil.which(name)
    return Path(found) if found else None


def tileiras() -> Path | None:
    return _bin("tileiras")


def tileirdisasm() -> Path | None:
    return _bin("tileirdisasm")


def cuobjdump() -> Path | None:
    return _bin("cuobjdump")


def nvdisasm() -> Path | None:
    return _bin("nvdisasm")


def env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for tileiras (matching ptxas first on PATH, no stray CUDA_HOME) and cargo builds."""
    e = dict(os.environ if base is None else base)
    e.pop("CUDA_HOME", None)
    e.pop("CUDA_PATH", None)
    root = cu13_root()
    if root:
        e["PATH"] = f"{root / 'bin'}{os.pathsep}{e.get('PATH', '')}"
        e["CUDA_TOOLKIT_PATH"] = str(root)
    ti = tileiras()
    if ti:
        e["CUTILE_TILEIRAS_PATH"] = str(ti)
    clang = libclang()
    if clang and "LIBCLANG_PATH" not in e:
        e["LIBCLANG_PATH"] = str(clang.parent)
    return e


def _version_of(path: Path, pattern: str = r"release ([\d.]+), V([\d.]+)") -> str:
    proc = _run([str(path), "--version"], env=env())
    m = re.search(pattern, proc.stdout + proc.stderr) if proc else None
    return m.group(2) if m else ""


# bindgen (clang-sys) loads libclang.so, libclang-N.so or a versioned one; libclang-cpp.so is the C++
# library of clang, not the C API bindgen calls.
LIBCLANG_NAME = re.compile(r"libclang(-\d+(\.\d+)*)?\.so(\.\d+)*")
LIBCLANG_DIRS = ("/usr/lib/llvm-*/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                 "/usr/lib")


def _natural(path: Path) -> list:
    """Sort key: llvm-18 after llvm-9."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def libclang_candidates() -> list[Path]:
    """Files named like the libclang bindgen loads: $LIBCLANG_PATH first, then the system
    directories (LIBCLANG_DIRS, or the globs of $TILEPORT_LIBCLANG_DIRS, `:`-separated), newest LLVM first."""
    dirs = [os.environ["LIBCLANG_PATH"]] if os.environ.get("LIBCLANG_PATH") else []
    patterns = os.environ["TILEPORT_LIBCLANG_DIRS"].split(os.pathsep) if "TILEPORT_LIBCLANG_DIRS" in os.environ \
        else LIBCLANG_DIRS
    dirs += [d for pattern in patterns for d in sorted(glob.glob(pattern), key=_natural, reverse=True)]
    out = []
    for d in dict.fromkeys(dirs):
        found = [p for p in Path(d).glob("libclang*.so*") if LIBCLANG_NAME.fullmatch(p.name)]
        out += sorted(found, key=_natural, reverse=True)
    return out


def libclang_load_error(path: Path) -> str:
    """'' when `path` loads as a shared library and exports libclang's C API, else why not."""
    import ctypes
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        return str(e)
    return "" if hasattr(lib, "clang_createIndex") else f"{path} does not export clang_createIndex"


@functools.cache
def libclang() -> Path | None:
    """The first libclang candidate that loads (None: bindgen cannot build the CUDA bindings)."""
    return next((p for p in libclang_candidates() if not libclang_load_error(p)), None)


def cuda_header_version(root: Path | None) -> int:
    header = root / "include" / "cuda.h" if root else None
    if not header or not header.is_file():
        return 0
    m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", header.read_text(errors="replace"))
    return int(m.group(1)) if m else 0


def package_version(dist: str) -> str:
    import importlib.metadata  # only `tileport doctor` needs it (keeps `import tileport.toolchain` light)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _check_cuda_tile() -> Component:
    v = package_version("cuda-tile")
    spec = importlib.util.find_spec("cuda.tile") if v else None
    return Component("cuTile Python (cuda-tile)", v == CUDA_TILE_VERSION, v,
                     str(Path(spec.origin).parent) if spec and spec.origin else "",
                     f"pip install 'cuda-tile=={CUDA_TILE_VERSION}'  (or: {SETUP_COMMAND})")


def _check_binary(name: str, finder, dist: str) -> Component:
    path = finder()
    version = _version_of(path) if path else ""
    ok = bool(path) and version.startswith(TILEIRAS_RELEASE)
    return Component(name, ok, version, str(path or ""),
                     f"pip install '{dist}=={TILEIRAS_RELEASE}.92'  (or: {SETUP_COMMAND})")


def _check_libnvvm() -> Component:
    root = cu13_root()
    lib = root / "lib" / "libnvvm.so.4" if root else None
    ok = bool(lib and lib.is_file())
    return Component("libnvvm (for tileiras)", ok, package_version("nvidia-nvvm"), str(lib) if ok else "",
                     f"pip install 'nvidia-nvvm=={TILEIRAS_RELEASE}.92'  (or: {SETUP_COMMAND})")


def _check_headers() -> list[Component]:
    root = cu13_root()
    inc = root / "include" if root else None
    hv = cuda_header_version(root)
    hv_text = f"{hv // 1000}.{hv % 1000 // 10}" if hv else ""
    out = [Component("CUDA headers: cuda.h >= 13.2", hv >= MIN_CUDA_HEADER_VERSION, hv_text,
                     str(inc / "cuda.h") if hv else "",
                     f"pip install 'nvidia-cuda-runtime=={TILEIRAS_RELEASE}.92'  (or: {SETUP_COMMAND})")]
    for header, dist in (("curand.h", "nvidia-curand"), ("crt/host_config.h", "nvidia-cuda-crt")):
        path = inc / header if inc else None
        ok = bool(path and path.is_file())
        out.append(Component(f"CUDA headers: {header}", ok, package_version(dist), str(path) if ok else "",
                             f"pip install '{dist}'  (or: {SETUP_COMMAND})"))
    return out


def _check_libclang() -> Component:
    path = libclang()
    version = re.search(r"llvm-(\d+)|libclang-(\d+)", str(path)) if path else None
    fix = "apt-get update && apt-get install -y libclang-dev  (or: set LIBCLANG_PATH to the folder of libclang.so)"
    if path is None and (bad := libclang_candidates()):
        fix = f"{bad[0]} does not load ({libclang_load_error(bad[0])}); " + fix
    return Component("libclang (bindgen)", bool(path), next((g for g in version.groups() if g), "") if version else "",
                     str(path or ""), fix)


def _check_rust() -> list[Component]:
    out = []
    for tool in ("cargo", "rustc"):
        path = shutil.which(tool)
        proc = _run([tool, "--version"]) if path else None
        m = re.search(r"(\d+)\.(\d+)\.(\d+)", proc.stdout) if proc else None
        ok = bool(m) and (int(m.group(1)), int(m.group(2))) >= MIN_RUST
        out.append(Component(tool, ok, m.group(0) if m else "", path or "",
                             "install Rust >= 1.89 with rustup: curl https://sh.rustup.rs -sSf | sh -s -- -y, "
                             "then `. ~/.cargo/env` (or: " + SETUP_COMMAND + ", which runs rustup when it can)"))
    return out


def cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))


def _check_cutile_crate() -> Component:
    hits = sorted(glob.glob(str(cargo_home() / "registry" / "src" / "*" / f"cutile-{CUTILE_CRATE_VERSION}")))
    return Component("cutile crate (crates.io)", bool(hits), CUTILE_CRATE_VERSION, hits[0] if hits else "",
                     "cargo fetch --manifest-path rust/Cargo.toml  (or: " + SETUP_COMMAND + ")")


def _check_cuobjdump() -> Component:
    path = cuobjdump()
    version = _version_of(path) if path else ""
    return Component("cuobjdump (register counts of cubins)", bool(path), version, str(path or ""),
                     f"pip install 'nvidia-cuda-cuobjdump=={TILEIRAS_RELEASE}.92'  (or: {SETUP_COMMAND})",
                     required=False)


def _check_nvdisasm() -> Component:
    """nvdisasm must list real instructions: disassemble a probe kernel compiled by ptxas."""
    import tempfile

    from tileport import sass  # doctor only
    path, ptxas = nvdisasm(), _bin("ptxas")
    fix = f"pip install 'nvidia-cuda-nvdisasm=={TILEIRAS_RELEASE}.92'  (or: {SETUP_COMMAND})"
    if path is None or ptxas is None:
        return Component("nvdisasm (SASS comparison of cubins)", False, "", str(path or ""), fix, required=False)
    version = _version_of(path)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sass.probe(ptxas, path, cuobjdump(), Path(tmp))
    except sass.SassError as e:
        return Component("nvdisasm (SASS comparison of cubins)", False, version, str(path),
                         f"disassembly fails ({e}); {fix}", required=False)
    return Component("nvdisasm (SASS comparison of cubins)", version.startswith(TILEIRAS_RELEASE), version,
                     str(path), fix, required=False)


def _check_gpu() -> Component:
    smi = shutil.which("nvidia-smi")
    proc = _run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"]) if smi else None
    text = proc.stdout.strip().splitlines()[0] if proc and proc.returncode == 0 and proc.stdout.strip() else ""
    return Component("NVIDIA GPU (for correctness and benchmarks)", bool(text), text, smi or "",
                     "run GPU stages on a machine with an NVIDIA GPU (sm_80+), driver r580+", required=False)


def _check_torch() -> Component:
    v = package_version("torch")
    return Component("PyTorch (operator library, GPU tests)", bool(v), v, "",
                     "pip install torch", required=False)


def check_all() -> list[Component]:
    """The toolchain's components, in the order `tileport doctor` lists them (tileport.doctor adds the runtime's)."""
    return [
        _check_cuda_tile(),
        _check_binary("tileiras", tileiras, "nvidia-cuda-tileiras"),
        _check_binary("tileirdisasm", tileirdisasm, "nvidia-cuda-tileiras"),
        _check_binary("ptxas (same release as tileiras)", lambda: _bin("ptxas"), "nvidia-cuda-nvcc"),
        _check_libnvvm(),
        *_check_headers(),
        _check_libclang(),
        *_check_rust(),
        _check_cutile_crate(),
        _check_cuobjdump(),
        _check_nvdisasm(),
        _check_gpu(),
        _check_torch(),
    ]
