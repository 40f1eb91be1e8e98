"""cutile_gpt's GEMM (linear.py `matmul_kernel`, `matmul_bias_kernel`): is the port's 1.06x time the kernel's or
the launch's?

On the CPU the two sides compile to the same machine code at launch: cuTile Python's launch signature for the
recorded arrays (f32 [256,768] @ [768,2304], strides 16-byte divisible, shapes divisible by 16) and cutile-rs's
(`compute_spec` of the same arrays) give SASS that `tileport.sass.compare` calls `same` (608 / 648 instructions,
64 registers, 2 UTMALDG (3 with the bias) + 1 UTMASTG, 8 HMMA.1688.F32.TF32; tests/capture/
test_matmul_launch_cubins.py). The four cubins in data/matmul_launch are those (`ref_*`: cuTile Python's
`export_kernel` for `KernelSignature.from_kernel_args` of the launch; `port_*`: the port's entry compiled by
cutile's `KernelCompiler` with the launch's `SpecializationBits`; tileiras 13.4, sm_90).

What still differs is how each side launches them: cuTile Python's launcher runs the kernel's host program
itself and raises the function's `MAX_DYNAMIC_SHARED_SIZE_BYTES` to the device's opt-in limit less the static
size when it loads a kernel; the port's resolved path calls `cuLaunchKernel` (block (1,1,1), no dynamic shared
memory), leaving the host program to the driver, and (since support.rs `configure_as_cutile_python`) sets the
same attribute. This test launches each cubin through the driver (ctypes) under each function configuration,
interleaved in rotated order on the same buffers, and times them as the parity stage does (CUPTI kernel time
after an L2 flush):

- `cutile_python` (ct.launch of the source kernel, when the source file is found) against `ref/plain` and
  `ref/max_dynamic_shared` (the same machine code launched by the driver): what cuTile Python's launcher
  itself is worth;
- same cubin, different configuration, different time: the function configuration matters;
- ref and port cubin equal under one configuration: the kernels are the same at run time.

Results: $TILEPORT_RESULTS_DIR/matmul-launch-config-<kernel>.json (default out/matmul-launch-gpu). Marked
`gpu`. The source kernel file: $TILEPORT_MATMUL_SOURCE (default out/wild/src/cutile_gpt/cutile_gpt/kernels/
linear.py). Run after the wild GPU check on the same machine, `test_runtime_cubins_are_kept` also copies the
cubins both runtimes compiled for these kernels out of their disk caches (runtime-cubins/<side>/), so that
their SASS can be compared on the CPU with the ones above (`tileport.sass.compare`).
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data" / "matmul_launch"
RESULTS = Path(os.environ.get("TILEPORT_RESULTS_DIR") or REPO / "out" / "matmul-launch-gpu")
SOURCE = Path(os.environ.get("TILEPORT_MATMUL_SOURCE")
              or REPO / "out" / "wild" / "src" / "cutile_gpt" / "cutile_gpt" / "kernels" / "linear.py")
M, K, N, TILE = 256, 768, 2304, 32
GRID = ((M // TILE) * (N // TILE), 1, 1)
ROUNDS = 3

# CUfunction_attribute / CUdevice_attribute values (cuda.h, CUDA 13)
ATTR = {"max_threads_per_block": 0, "shared_size_bytes": 1, "num_regs": 4, "max_dynamic_shared_size_bytes": 8,
        "preferred_shared_memory_carveout": 9}
SET_MAX_DYNAMIC_SHARED, SET_CARVEOUT = 8, 9
DEVICE_MAX_SHARED_PER_BLOCK_OPTIN = 97


class Driver:
    """The few CUDA driver calls the test needs, on the context torch made current."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def check(self, rc: int, what: str) -> None:
        if rc:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{what}: {name.value.decode() if name.value else rc}")

    def load(self, cubin: bytes):
        """(module, its only function, the function's name)."""
        module, count = ctypes.c_void_p(), ctypes.c_uint()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(cubin)), "cuModuleLoadData")
        self.check(self.lib.cuModuleGetFunctionCount(ctypes.byref(count), module), "cuModuleGetFunctionCount")
        if count.value != 1:
            raise RuntimeError(f"expected one kernel in the cubin, found {count.value}")
        functions = (ctypes.c_void_p * 1)()
        self.check(self.lib.cuModuleEnumerateFunctions(functions, 1, module), "cuModuleEnumerateFunctions")
        name = ctypes.c_char_p()
        self.check(self.lib.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(functions[0])), "cuFuncGetName")
        return module, ctypes.c_void_p(functions[0]), name.value.decode()

    def attributes(self, function) -> dict:
        out = {}
        for key, attr in ATTR.items():
            value = ctypes.c_int()
            self.check(self.lib.cuFuncGetAttribute(ctypes.byref(value), attr, function), f"cuFuncGetAttribute {key}")
            out[key] = value.value
        return out

    def set_attribute(self, function, attr: int, value: int) -> None:
        self.check(self.lib.cuFuncSetAttribute(function, attr, value), f"cuFuncSetAttribute {attr}={value}")

    def device_attribute(self, attr: int, device: int) -> int:
        value = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(value), attr, device), "cuDeviceGetAttribute")
        return value.value

    def launch(self, function, params, stream: int) -> None:
        self.check(self.lib.cuLaunchKernel(function, *GRID, 1, 1, 1, 0, ctypes.c_void_p(stream), params, None),
                   "cuLaunchKernel")


def _params(arrays):
    """The Tile IR kernel ABI: per array its pointer, then its extents and strides as i32."""
    values = []
    for t in arrays:
        values.append(ctypes.c_uint64(t.data_ptr()))
        values += [ctypes.c_int32(d) for d in t.shape] + [ctypes.c_int32(s) for s in t.stride()]
    pointers = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    return values, pointers  # the values must outlive the launches


def _configure(driver: Driver, function, config: str, device: int) -> None:
    if config == "max_dynamic_shared":  # what cuTile Python's launcher sets when it loads a kernel
        limit = driver.device_attribute(DEVICE_MAX_SHARED_PER_BLOCK_OPTIN, device)
        static = driver.attributes(function)["shared_size_bytes"]
        driver.set_attribute(function, SET_MAX_DYNAMIC_SHARED, limit - static)
    elif config == "carveout_max":
        driver.set_attribute(function, SET_CARVEOUT, 100)


def _source_launcher(kernel: str, args):
    """ct.launch of the source kernel, or the reason it cannot run here."""
    if not SOURCE.is_file():
        return None, f"source file not found: {SOURCE}"
    try:
        import cuda.tile as ct
        import torch

        from tileport.capture import kernel_namespace  # as the differential test loads it: nothing of the file runs
        source = kernel_namespace(SOURCE)[kernel]
    except Exception as e:  # noqa: BLE001 - recorded as the reason the reference path did not run
        return None, f"{type(e).__name__}: {e}"
    return (lambda: ct.launch(torch.cuda.current_stream(), GRID, source, args)), None


CACHES = {  # where each runtime keeps the cubins it compiled (cuTile Python's disk cache, cutile's JIT store)
    "cutile_python": Path(os.environ.get("CUDA_TILE_CACHE_DIR")
                          or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cutile-python"),
    "cutile_rs": Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cutile" / "kernels",
}


def _cached_blobs(side: str, root: Path):
    """(where, bytes) of every entry of a runtime's cubin cache: cuTile Python's is an SQLite table, cutile's
    a tree of .cubin files."""
    if side == "cutile_python":
        import sqlite3
        db = root / "cache.db"
        if not db.is_file():
            return
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for key, blob in conn.execute("SELECT key, blob FROM cache"):
                yield f"{db}#{key}", bytes(blob)
        finally:
            conn.close()
    elif root.is_dir():
        for path in sorted(root.rglob("*.cubin")):
            yield str(path), path.read_bytes()


def test_runtime_cubins_are_kept():
    """Copy the GEMM cubins the two runtimes compiled (if this machine ran them) for a CPU SASS comparison."""
    found = {}
    for side, root in CACHES.items():
        kept = []
        for where, data in _cached_blobs(side, root):
            start = data.find(b"\x7fELF")  # a store may put a header before the ELF image
            if start >= 0 and (b"matmul_kernel" in data or b"matmul_bias_kernel" in data):
                dst = RESULTS / "runtime-cubins" / side / f"{len(kept)}.cubin"
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(data[start:])
                kept.append({"from": where, "to": str(dst)})
        found[side] = {"cache": str(root), "exists": root.exists(), "cubins": kept}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "runtime-cubins.json").write_text(json.dumps(found, indent=1))
    missing = [side for side, f in found.items() if not f["cubins"]]
    assert not missing, f"no GEMM cubin in the cache of {missing} (run the wild GPU check first): {found}"


@pytest.mark.parametrize("kernel", ["matmul_kernel", "matmul_bias_kernel"])
def test_same_cubin_under_each_launch_configuration(kernel):
    import torch

    from tileport.gpu.bench import environment
    from tileport.gpu.timing import gpu_time, make_flush
    torch.manual_seed(0)
    device = torch.cuda.current_device()
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    bias = torch.randn(N, device="cuda")
    c = torch.empty(M, N, device="cuda")
    arrays = (a, b, bias, c) if kernel == "matmul_bias_kernel" else (a, b, c)
    expected = a.double() @ b.double() + (bias.double() if kernel == "matmul_bias_kernel" else 0)
    _keep, params = _params(arrays)
    driver, flush, stream = Driver(), make_flush("cuda"), torch.cuda.current_stream().cuda_stream

    runs, functions = {}, {}
    for side in ("ref", "port"):
        cubin = (DATA / f"{side}_{kernel}.cubin").read_bytes()
        for config in ("plain", "max_dynamic_shared", "carveout_max"):
            _module, function, name = driver.load(cubin)  # a module per configuration: attributes stay apart
            _configure(driver, function, config, device)
            functions[f"{side}/{config}"] = {"symbol": name, **driver.attributes(function)}
            runs[f"{side}/{config}"] = (lambda f=function: driver.launch(f, params, stream))
    source_run, source_skipped = _source_launcher(kernel, (*arrays, TILE, TILE, TILE))
    if source_run is not None:
        runs["cutile_python"] = source_run

    errors = {}
    for label, run in runs.items():
        c.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        errors[label] = float((c.double() - expected).abs().max())
    times: dict[str, list[float]] = {label: [] for label in runs}
    labels = list(runs)
    for r in range(ROUNDS):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            times[label].append(gpu_time(runs[label], flush, budget_s=0.3).median_us)

    medians = {label: statistics.median(t) for label, t in times.items()}
    base = medians["ref/plain"]
    record = {"environment": environment(), "kernel": kernel, "grid": GRID, "shapes": [list(t.shape) for t in arrays],
              "functions": functions, "max_abs_err": errors, "times_us": times, "median_us": medians,
              "ratio_to_ref_plain": {label: m / base for label, m in medians.items()},
              "cutile_python_skipped": source_skipped}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"matmul-launch-config-{kernel}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(out)
    bad = {label: e for label, e in errors.items() if not e < 0.5}  # TF32 over K=768 of N(0,1) data: ~0.05
    assert not bad, f"wrong results (max abs error): {bad}"
