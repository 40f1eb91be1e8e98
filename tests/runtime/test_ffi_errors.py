"""Every bad input at the C ABI comes back as the right typed exception of tileport.runtime.abi.

CPU only: arrays are small fake objects exposing `__cuda_array_interface__` (and `__dlpack_device__`)
with made-up device pointers. The launchers validate every descriptor, dtype, constant and the grid
before they touch the device, so each check is reached without a GPU; a valid call then fails
cleanly on the missing driver. No Rust panic may cross the boundary (checked in a subprocess, so a
crash would be seen as one). The Python and Rust sides of the ABI must agree on every constant.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fake_arrays import FakeArray, f32
from tileport.emit.rust import idiom, lowering
from tileport.runtime import abi
from tileport.runtime.abi import (DTypeError, FFIError, InternalError, InvalidArgumentError, KernelLaunchError,
                                  LayoutError, NullTensorError, RankError, ShapeError, TileportError,
                                  WrongDeviceError)

pytestmark = pytest.mark.cargo

REPO = Path(__file__).resolve().parents[2]
SUPPORT_RS = REPO / "src" / "tileport" / "emit" / "rust" / "templates" / "support.rs"
LAUNCH_RS = SUPPORT_RS.with_name("launch.rs")
N = 1024


def driver_present() -> bool:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


@pytest.fixture(scope="module")
def vadd(library):
    return library["vector_add_kernel"]


def call_ok_until_device(entry, *args, **kw):
    """A call whose arguments are all valid: it fails only where the device is needed."""
    with pytest.raises(abi.DeviceError) as info:
        entry(*args, **kw)
    assert info.value.code == -5
    return info.value


# ---------------------------------------------------------------- descriptors


def test_null_descriptor(vadd):
    with pytest.raises(NullTensorError) as info:
        vadd(None, f32(N), f32(N), 256, grid=(4,))
    assert info.value.code == -1
    assert str(info.value) == "vector_add_kernel: tensor `a` is a null descriptor"


def test_null_data_pointer(vadd):
    with pytest.raises(NullTensorError, match="tensor `b` has a null data pointer") as info:
        vadd(f32(N), f32(N, ptr=0), f32(N), 256, grid=(4,))
    assert info.value.code == -1


def test_wrong_rank(vadd):
    with pytest.raises(RankError, match=r"tensor `a` has rank 2, the kernel needs rank 1") as info:
        vadd(f32(N, 2), f32(N), f32(N), 256, grid=(4,))
    assert info.value.code == -3 and isinstance(info.value, ValueError)


def test_rank_above_the_descriptor_limit_is_refused_in_python(vadd):
    with pytest.raises(RankError, match="at most 6"):
        vadd(f32(*(2,) * 7), f32(N), f32(N), 256, grid=(4,))


@pytest.mark.parametrize("extent", [2 ** 31, -1])
def test_extent_outside_i32(vadd, extent):
    with pytest.raises(ShapeError, match=rf"tensor `a` extent {extent} of dim 0 is outside 0..=i32::MAX") as info:
        vadd(FakeArray((extent,), "<f4", strides=(4,)), f32(N), f32(N), 256, grid=(4,))
    assert info.value.code == -4


def test_stride_outside_i32(vadd):
    with pytest.raises(LayoutError, match="stride 2147483648 of dim 0 does not fit in i32"):
        vadd(f32(N, strides=(2 ** 31 * 4,)), f32(N), f32(N), 256, grid=(4,))


def test_overlapping_output_strides(vadd):
    with pytest.raises(LayoutError, match=r"output tensor `c` has overlapping elements \(strides \[0\]\)") as info:
        vadd(f32(N), f32(N), f32(N, strides=(0,)), 256, grid=(4,))
    assert info.value.code == -9
    # the same stride on an input (a broadcast read) is fine: the call gets as far as the device
    if not driver_present():
        call_ok_until_device(vadd, f32(N, strides=(0,)), f32(N), f32(N), 256, grid=(4,))


def test_overlapping_rows_of_a_2d_output(library):
    softmax = library["softmax_tma_kernel"]  # x, y: rank 2, y written
    with pytest.raises(LayoutError, match="output tensor `y`"):
        softmax(f32(64, 128), f32(64, 128, strides=(64 * 4, 4)), 1, 128, grid=(8,))


# ---------------------------------------------------------------- layouts checked before the call


@pytest.fixture
def no_launch(monkeypatch):
    """Make the entries' launchers fail the test if called: these layouts must be refused first."""
    def never(*args):
        raise AssertionError("the launcher must not be called")

    def patch(entry):
        monkeypatch.setattr(entry, "fn", never)
        return entry
    return patch


def test_misaligned_base_is_refused_before_the_launch(vadd, no_launch):
    from fake_arrays import fake_address
    with pytest.raises(abi.MisalignedError, match="tensor `b` starts at .* not a multiple of 16 bytes") as info:
        no_launch(vadd)(f32(N), f32(N, ptr=fake_address() + 4), f32(N), 256, grid=(4,))
    assert info.value.code == -9 and isinstance(info.value, LayoutError)


def test_in_place_output_is_refused_before_the_launch(vadd, no_launch):
    a = f32(N)
    with pytest.raises(abi.AliasingError, match="output `c` shares memory with input `a`"):
        no_launch(vadd)(a, f32(N), a, 256, grid=(4,))
    with pytest.raises(abi.AliasingError, match="output `c` shares memory with input `b`"):
        no_launch(vadd)(f32(N), a, FakeArray((N // 2,), ptr=a.ptr + 256), 256, grid=(4,))


def test_non_contiguous_rows_for_the_gather_softmax(library, no_launch):
    gather = no_launch(library["softmax_gather_kernel"])
    with pytest.raises(LayoutError, match="tensor `y` has stride 3 in dimension 1"):
        gather(f32(64, 128), f32(64, 128, strides=(3 * 128 * 4, 12)), 128, grid=(8,))


# ---------------------------------------------------------------- dtypes


def test_mismatched_dtypes_in_one_generic(vadd):
    with pytest.raises(DTypeError, match="tensor `b` is f16 but `a` is f32; they must match") as info:
        vadd(f32(N), FakeArray((N,), "<f2"), f32(N), 256, grid=(4,))
    assert info.value.code == -2 and isinstance(info.value, TypeError)


def test_unsupported_dtype(vadd):
    f64 = [FakeArray((N,), "<f8") for _ in range(3)]
    with pytest.raises(DTypeError, match=r"dtype f64 is not supported \(supported: f32, f16, bf16\)"):
        vadd(*f64, 256, grid=(4,))


def test_dtype_unknown_to_the_abi_is_refused_in_python(vadd):
    with pytest.raises(DTypeError, match="unsupported typestr"):
        vadd(FakeArray((N,), "<c8"), f32(N), f32(N), 256, grid=(4,))


def test_fixed_dtype_array(library):
    rope = library["rope_kernel"]  # cos / sin are f32 tables whatever the dtype of x and y
    x, y = FakeArray((2, 8, 4, 2, 32), "<f2"), FakeArray((2, 8, 4, 2, 32), "<f2")
    with pytest.raises(DTypeError, match="tensor `cos` must be f32, got f16"):
        rope(x, FakeArray((8, 32), "<f2"), f32(8, 32), y, 8, 4, 32, grid=(1, 1, 2))
    if not driver_present():
        call_ok_until_device(rope, x, f32(8, 32), f32(8, 32), y, 8, 4, 32, grid=(1, 1, 2))


def test_specialized_entries_check_their_own_dtypes(library):
    mm = library["matmul_kernel"]
    a16 = [FakeArray((256, 256), "<f2") for _ in range(3)]
    a32 = [f32(256, 256) for _ in range(3)]
    # USE_TF32 selects the TF32 entry, whose arrays are f32
    with pytest.raises(DTypeError, match="tensor `a` must be f32, got f16"):
        mm(*a16, 128, 128, 64, 8, True, grid=(4,))
    # the other entry is generic over f16 / bf16 only
    with pytest.raises(DTypeError, match=r"dtype f32 is not supported \(supported: f16, bf16\)"):
        mm(*a32, 128, 128, 64, 8, False, grid=(4,))
    if not driver_present():
        call_ok_until_device(mm, *a16, 128, 128, 64, 8, False, grid=(4,))
        call_ok_until_device(mm, *a32, 128, 128, 64, 8, True, grid=(4,))


# ---------------------------------------------------------------- constants and grid


@pytest.mark.parametrize("tile", [100, 0, -256, 3])
def test_tile_constant_must_be_a_power_of_two(vadd, tile):
    with pytest.raises(InvalidArgumentError, match=rf"`TILE` = {tile} must be a positive power of two") as info:
        vadd(f32(N), f32(N), f32(N), tile, grid=(4,))
    assert info.value.code == -6


@pytest.mark.parametrize("grid", [(0,), (4, 0), (4, 1, 0)])
def test_empty_grid(vadd, grid):
    with pytest.raises(InvalidArgumentError, match="has an empty dimension"):
        vadd(f32(N), f32(N), f32(N), 256, grid=grid)


PROBE = textwrap.dedent('''
    import cuda.tile as ct

    ConstInt = ct.Constant[int]


    @ct.kernel
    def probe_kernel(x, y, TILE: ct.Constant[int], MODE: ct.Constant[int], ALPHA: ct.Constant[float]):
        t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
        if MODE == 1:
            t = t * ALPHA
        ct.store(y, index=(ct.bid(0),), tile=t)
''')


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """A small crate with integer- and float-specialized entries (the corpus pins only bools)."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    from tileport.frontends.cutile import KernelConfig
    from tileport.runtime.library import KernelLibrary, build
    from tileport.translate import translate
    root = tmp_path_factory.mktemp("ffi_probe")
    src = root / "probe.py"
    src.write_text(PROBE)
    cfg = KernelConfig(tuple({"x": "f32", "y": "f32", "MODE": m, "ALPHA": 0.5} for m in (1, 2)))
    report = translate([str(src)], root / "crate", {str(src): {"probe_kernel": cfg}}, crate="tileport_ffi_probe")
    assert report.ok and report.results[0].entries == ["probe_kernel_mode1_alpha0p5", "probe_kernel_mode2_alpha0p5"]
    shutil.copy(REPO / "rust" / "Cargo.lock", root / "crate" / "Cargo.lock")  # same dependency versions
    so = build(root / "crate", "dev")
    return KernelLibrary(so, root / "crate" / "kernels.json")["probe_kernel"]


def test_specialized_constant_without_an_entry(probe):
    with pytest.raises(InvalidArgumentError) as info:
        probe(f32(N), f32(N), TILE=256, MODE=3, ALPHA=0.5, grid=(4,))
    assert info.value.code == -6
    assert str(info.value) == ("probe_kernel: no entry of `probe_kernel` is specialized for ALPHA=0.5, MODE=3")
    with pytest.raises(InvalidArgumentError, match="specialized for ALPHA=0.25, MODE=1"):
        probe(f32(N), f32(N), TILE=256, MODE=1, ALPHA=0.25, grid=(4,))
    if not driver_present():  # values with an entry get past the selection
        call_ok_until_device(probe, f32(N), f32(N), TILE=256, MODE=2, ALPHA=0.5, grid=(4,))


# ---------------------------------------------------------------- devices and objects (Python side)


def test_arrays_on_different_devices(vadd, monkeypatch):
    def never(*args):
        raise AssertionError("the launcher must not be called")
    monkeypatch.setattr(vadd, "fn", never)
    with pytest.raises(WrongDeviceError, match=r"arrays are on different devices \[0, 1\]") as info:
        vadd(f32(N, device=0), f32(N, device=1), f32(N, device=0), 256, grid=(4,))
    assert isinstance(info.value, abi.DeviceError) and isinstance(info.value, ValueError)


def test_array_not_in_device_memory(vadd):
    with pytest.raises(WrongDeviceError, match="not in CUDA device memory"):
        vadd(f32(N, device_kind=1), f32(N), f32(N), 256, grid=(4,))


@pytest.mark.parametrize("obj", [[1.0] * 4, object(), 3.0], ids=["list", "object", "float"])
def test_non_array_object(vadd, obj):
    with pytest.raises(TypeError, match="expected a CUDA torch tensor, an object with __cuda_array_interface__"):
        vadd(obj, f32(N), f32(N), 256, grid=(4,))


def test_wrong_arguments_are_type_errors(vadd):
    with pytest.raises(TypeError, match="missing TILE"):
        vadd(f32(N), f32(N), f32(N), grid=(4,))
    with pytest.raises(TypeError, match="no parameter `tile`"):
        vadd(f32(N), f32(N), f32(N), tile=256, grid=(4,))


# ---------------------------------------------------------------- the device


def test_no_driver_is_a_device_error(vadd):
    if driver_present():
        pytest.skip("a CUDA driver is installed on this machine")
    err = call_ok_until_device(vadd, f32(N), f32(N), f32(N), 256, grid=(4,))
    assert str(err).startswith("vector_add_kernel: cannot open CUDA device 0: ")
    assert "CUDA driver library unavailable" in str(err)
    assert type(err) is abi.DeviceError


# ---------------------------------------------------------------- return codes and panics


def rust_codes() -> dict[str, int]:
    body = re.search(r"pub enum Code \{(.*?)\}", SUPPORT_RS.read_text(), re.S).group(1)
    return {name: int(value) for name, value in re.findall(r"(\w+) = (-?\d+),", body)}


EXCEPTION_OF = {"NullPointer": NullTensorError, "DType": DTypeError, "Rank": RankError, "Shape": ShapeError,
                "Device": abi.DeviceError, "InvalidArgument": InvalidArgumentError, "Launch": KernelLaunchError,
                "Panic": InternalError, "Layout": LayoutError}


def test_every_return_code_maps_to_its_exception():
    codes = rust_codes()
    assert sorted(codes) == sorted(EXCEPTION_OF)
    assert sorted(abi.ERRORS) == sorted(codes.values())
    for name, code in codes.items():
        with pytest.raises(EXCEPTION_OF[name]) as info:
            abi.raise_for(code, f"message {name}")
        assert type(info.value) is EXCEPTION_OF[name]
        assert info.value.code == code and str(info.value) == f"message {name}"
        assert isinstance(info.value, FFIError) and isinstance(info.value, TileportError)
    abi.raise_for(0, "ignored")  # success raises nothing
    with pytest.raises(FFIError) as info:
        abi.raise_for(-42, "")
    assert type(info.value) is FFIError and info.value.code == -42 and "code -42" in str(info.value)
    # the ValueError / TypeError bases let callers treat argument errors the Python way
    for cls in (NullTensorError, RankError, ShapeError, InvalidArgumentError, LayoutError, WrongDeviceError):
        assert issubclass(cls, ValueError)
    assert issubclass(DTypeError, TypeError)


PANIC_SCRIPT = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from tileport.runtime.library import KernelLibrary
    lib = KernelLibrary(Path(sys.argv[1]), Path(sys.argv[2]))
    out = {}
    for label, generics in (("panic", ["notadtype", "1", "256", "-1", "-1"]),
                              ("jit", ["f32", "notanumber", "256", "-1", "-1"])):
        try:
            lib.ir("softmax_tma_kernel", generics)
            out[label] = None
        except Exception as e:
            out[label] = [type(e).__name__, getattr(e, "code", None), str(e)[:400]]
    vadd = next(e for e in lib.manifest["entries"] if e["kernel"] == "vector_add_kernel")["variants"][0]
    generics = ["f32", "256"] + ["-1"] * (len(vadd["generics"]) - 2)  # E, TILE, then the unit-axis lengths
    out["after"] = len(lib.ir("vector_add_kernel", generics)[1]) > 0
    print(json.dumps(out))
''')


def test_no_panic_crosses_the_boundary(library):
    """A malformed generic makes cutile's compiler panic inside `tileport_ir`; `guard` must catch it."""
    env = {**os.environ, "TILEPORT_JIT_CACHE": "0", "RUST_BACKTRACE": "0"}
    proc = subprocess.run([sys.executable, "-c", PANIC_SCRIPT, str(library.path),
                           str(REPO / "rust" / "kernels.json")], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, f"the process died (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    cls, code, message = out["panic"]
    assert (cls, code) == ("InternalError", -8), out["panic"]
    assert message.startswith("tileport_ir: internal panic: ")
    assert "panicked" in proc.stderr  # it really was a panic, contained by catch_unwind
    cls, code, message = out["jit"]  # a compile error, not a panic: a launch-class error
    assert (cls, code) == ("KernelLaunchError", -7) and "notanumber" in message
    assert out["after"] is True  # the library still works after the panic


def vadd_generics(manifest: dict) -> list[str]:
    """Generic arguments of vector_add's entry: E, TILE, then its unit-axis lengths (dynamic)."""
    variant = next(e for e in manifest["entries"] if e["kernel"] == "vector_add_kernel")["variants"][0]
    return ["f32", "256"] + ["-1"] * (len(variant["generics"]) - 2)


def test_missing_launcher_symbol_fails_only_when_called(library, tmp_path):
    """A manifest entry whose launcher the library lacks (a host-side defect) does not stop the library
    from loading (the CPU Tile IR export needs no launcher); calling that entry is a typed error."""
    from tileport.runtime.library import KernelLibrary, MissingSymbolError
    manifest = json.loads(json.dumps(library.manifest))
    ghost = next(e for e in manifest["entries"] if e["kernel"] == "vector_add_kernel")
    manifest["entries"].append({**ghost, "kernel": "ghost_kernel", "symbol": "tileport_no_such_launcher"})
    (tmp_path / "kernels.json").write_text(json.dumps(manifest))
    lib = KernelLibrary(library.path, tmp_path / "kernels.json")
    with pytest.raises(MissingSymbolError, match="does not export `tileport_no_such_launcher`"):
        lib["ghost_kernel"](f32(N), f32(N), f32(N), 256, grid=(4,))
    assert len(lib.ir("vector_add_kernel", vadd_generics(manifest))[1]) > 0
    with pytest.raises(InvalidArgumentError, match="has an empty dimension"):  # the other entries work
        lib["vector_add_kernel"](f32(N), f32(N), f32(N), 256, grid=(0,))


def test_ir_export_unknown_entry(library):
    with pytest.raises(InvalidArgumentError, match="unknown entry `no_such_entry`"):
        library.ir("no_such_entry", ["f32"])


# ---------------------------------------------------------------- the ABI constants


def test_dtype_codes_agree():
    text = SUPPORT_RS.read_text()
    module = re.search(r"pub mod dtype \{(.*?)\n\}", text, re.S).group(1)
    rust = {name: int(v) for name, v in re.findall(r"pub const (\w+): i32 = (\d+);", module)}
    names = dict(re.findall(r"(\w+) => \"(\w+)\",", module))
    assert {names[c]: rust[c] for c in rust} == abi.DTYPE_CODES
    assert lowering.DTYPE_CODE == abi.DTYPE_CODES
    assert {lowering.DTYPE_CONST[d]: code for d, code in lowering.DTYPE_CODE.items()} == rust


def test_descriptor_layout_agrees():
    text = SUPPORT_RS.read_text()
    assert int(re.search(r"pub const MAX_DIMS: usize = (\d+);", text).group(1)) == abi.MAX_DIMS
    body = re.search(r"pub struct TensorDesc \{(.*?)\}", text, re.S).group(1)
    fields = re.findall(r"pub (\w+): ([^,]+),", body)
    rust_types = {"u64": ctypes.c_uint64, "i32": ctypes.c_int32,
                  "[i64; MAX_DIMS]": ctypes.c_int64 * abi.MAX_DIMS}
    assert [name for name, _ in fields] == [name for name, _ in abi.TensorDesc._fields_]
    for (name, rty), (_, cty) in zip(fields, abi.TensorDesc._fields_):
        assert ctypes.sizeof(rust_types[rty]) == ctypes.sizeof(cty), name
    assert "#[repr(C)]\npub struct TensorDesc" in text
    assert ctypes.sizeof(abi.TensorDesc) == 8 + 4 + 4 + 8 * abi.MAX_DIMS * 2 + 4 + 4


def test_abi_version_and_support_copy(library, tmp_path):
    text = SUPPORT_RS.read_text()
    rust_version = int(re.search(r"fn tileport_abi_version\(\) -> i32 \{\s*(\d+)", text).group(1))
    assert rust_version == abi.ABI_VERSION == library.dll.tileport_abi_version()
    assert library.manifest["abi_version"] == abi.ABI_VERSION
    # the generated crate carries the template (idiomatic: without the faithful launchers' items, then the launch
    # path), formatted as the crate is
    if shutil.which("rustfmt") is None:
        pytest.skip("rustfmt is not installed")
    crate = REPO / "rust"
    if (crate / "rustfmt.toml").is_file():
        text = idiom.support_rs(text, LAUNCH_RS.read_text())
        shutil.copy(crate / "rustfmt.toml", tmp_path / "rustfmt.toml")
    copy = tmp_path / "support.rs"
    copy.write_text(text)
    subprocess.run(["rustfmt", "--edition", "2024", str(copy)], check=True)
    assert (crate / "src" / "support.rs").read_text() == copy.read_text()


# ---------------------------------------------------------------- a launcher over a `Layouts` table


def _decode_partial_args(final: bool, o_part_dtype: str, paged=False, sinks=False):
    """flash_decode_partial_kernel's arguments (q, k, v f16; block_table, kv_lens i32; sinks, lse_part f32)."""
    f16 = lambda *s: FakeArray(s, "<f2")  # noqa: E731
    i32 = lambda *s: FakeArray(s, "<i4")  # noqa: E731
    arrays = (f16(2, 8, 1, 64), f16(2, 2, 256, 64), f16(2, 2, 256, 64), i32(2, 4), i32(2), f32(8),
              FakeArray((2, 8, 4, 1, 64), o_part_dtype), f32(2, 8, 4, 1))
    return (*arrays, 0.125, 0.0, 0, 2, 16, 64, 64, paged, False, sinks, False, final)


def test_a_layouts_launcher_checks_each_entrys_dtypes_in_order(library):
    """flash_decode_partial's entries differ in o_part's dtype (the element type when FINAL, else f32): one
    launch reads it from the entry's row, with the messages of the per-entry checks."""
    partial = library["flash_decode_partial_kernel"]
    with pytest.raises(DTypeError, match="tensor `o_part` must be f32, got f16"):
        partial(*_decode_partial_args(False, "<f2"), grid=(4, 16, 2))
    with pytest.raises(DTypeError, match="tensor `o_part` is f32 but `q` is f16; they must match"):
        partial(*_decode_partial_args(True, "<f4"), grid=(4, 16, 2))
    with pytest.raises(InvalidArgumentError, match="no entry of `flash_decode_partial_kernel` is specialized for "
                       "FINAL=false, HAS_SINKS=true, PAGED=true, SLIDING=false, SOFTCAP=false"):
        partial(*_decode_partial_args(False, "<f4", paged=True, sinks=True), grid=(4, 16, 2))
    if not driver_present():
        call_ok_until_device(partial, *_decode_partial_args(True, "<f2"), grid=(4, 16, 2))
        call_ok_until_device(partial, *_decode_partial_args(False, "<f4", paged=True), grid=(4, 16, 2))
