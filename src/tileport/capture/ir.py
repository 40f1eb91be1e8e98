"""Tile IR capture on the CPU, both sides, plus cubins.

- Reference: the cuTile Python kernel exported with `cuda.tile.compilation.export_kernel` for an
  explicit signature (bytecode 13.4, no GPU). The kernel file is never imported or executed: cuTile
  compiles a module rebuilt from its AST (`tileport.capture.source`).
- Generated: the same kernel's cutile-rs port compiled by the cutile compiler inside the generated
  cdylib (`tileport_ir`), for the same signature.
- Both: text with `tileirdisasm`, cubins with `tileiras` for several architectures; a compile
  failure is a recorded result, not an exception.
"""

from __future__ import annotations

import ast
import hashlib
import json
import linecache
import tempfile
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tileport import toolchain
from tileport.cache import DiskCache, sha256, tool_key
from tileport.capture.export import export_bytecode
from tileport.capture.signature import Capture
from tileport.capture.source import SanitizedModule, SourceError, restricted_builtins, sanitize
from tileport.model.types import dim_op
from tileport.proc import ToolTimeout
from tileport.proc import run as run_tool
from tileport.runtime.library import KernelLibrary
from tileport.sass import Sass, SassError
from tileport.sass import disassemble as disassemble_sass
from tileport.sass import listing as sass_listing

ARCHS = ("sm_80", "sm_90", "sm_100")
TILEIRAS_FLAGS = ["-O3"]  # part of the cubin cache key: other flags, other cubins
TILEIRAS_TIMEOUT_S = 600.0  # one kernel, one architecture (seconds for the corpus's largest)
DISASM_TIMEOUT_S = 120.0

_MODULES: dict[tuple[str, str], tuple[dict, SanitizedModule]] = {}
# One rebuild at a time: a module is registered before its text has run (so that a module importing it back
# finds it), and another thread must not take that half-built namespace. Reentrant: imports rebuild too.
_MODULES_LOCK = threading.RLock()


class CaptureError(RuntimeError):
    pass


def _register_source(sanitized: SanitizedModule) -> None:
    """cuTile reads a kernel's source through `inspect`/`linecache`: give it the sanitized text under the
    user's path (lines aligned), so that its locations name the user's lines. No mtime: never re-read."""
    lines = sanitized.source.splitlines(keepends=True)
    linecache.cache[str(sanitized.path)] = (len(sanitized.source), None, lines, str(sanitized.path))


def _cuda_tile_names() -> frozenset[str] | None:
    """What `from cuda.tile import X` can import here (None without cuda.tile: then nothing is checked)."""
    try:
        import cuda.tile
    except ImportError:
        return None
    return frozenset(dir(cuda.tile))


def _load(path: str | Path) -> tuple[dict, SanitizedModule]:
    with _MODULES_LOCK:
        return _load_locked(path)


def _load_locked(path: str | Path) -> tuple[dict, SanitizedModule]:
    resolved = Path(path).resolve()
    try:
        text = resolved.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CaptureError(f"{path}: cannot be read: {e}") from None
    key = (str(resolved), hashlib.sha256(text.encode()).hexdigest())
    if key not in _MODULES:
        try:
            sanitized = sanitize(resolved, text, _cuda_tile_names())
        except SourceError as e:
            raise CaptureError(f"{path}: {e.diagnostic}") from None
        name = f"tileport_kernels_{key[1][:16]}"
        namespace: dict[str, Any] = {"__name__": name, "__file__": str(resolved),
                                     "__builtins__": restricted_builtins()}
        _MODULES[key] = namespace, sanitized  # before its imports: a module they import back finds it
        try:
            _bind_imports(namespace, sanitized)
            _register_source(sanitized)
            exec(compile(sanitized.source, str(resolved), "exec"), namespace)  # tileport-generated text only
        except Exception as e:  # noqa: BLE001 - e.g. `from cuda.tile import <name cuTile lacks>`
            del _MODULES[key]
            raise CaptureError(f"{path}: the kernel definitions rebuilt from the file do not load: {e}") from e
    namespace, sanitized = _MODULES[key]
    _register_tree(sanitized, set())  # again: a `linecache.clearcache()` elsewhere must not expose a raw file
    return namespace, sanitized


def _register_tree(sanitized: SanitizedModule, seen: set[str]) -> None:
    """The rebuilt text of a module and of every module of the package it takes helpers from."""
    seen.add(str(sanitized.path))
    _register_source(sanitized)
    for file in sorted(_imported_files(sanitized) - seen):
        found = next((m for (p, _), (_, m) in reversed(_MODULES.items()) if p == file), None)
        if found is not None:
            _register_tree(found, seen)


def _imported_files(sanitized: SanitizedModule) -> set[str]:
    files = {f for f, _ in sanitized.imports.values()} | {f for attrs in sanitized.modules.values()
                                                          for f, _ in attrs.values() if f}
    return {str(Path(f).resolve()) for f in files}


def source_files(path: str | Path) -> list[Path]:
    """The files the rebuilt module of `path` is made of: the file, then (recursively) the modules of its
    package whose helpers its functions use (a cache of its reference IR depends on all of them)."""
    seen: list[str] = []
    todo = [str(Path(path).resolve())]
    while todo:
        file = todo.pop()
        if file in seen:
            continue
        seen.append(file)
        todo += sorted(_imported_files(_load(file)[1]))
    return [Path(f) for f in seen]


def _bind_imports(namespace: dict, sanitized: SanitizedModule) -> None:
    """The helpers (and modules) of other modules of the package the kept functions use, from those modules
    rebuilt the same way (their functions compile from their own files' rebuilt text)."""
    def function(file: str, fn: str):
        other, _ = _load(file)
        if fn not in other:
            raise CaptureError(f"`{fn}` of {file} is not defined yet (modules importing each other)")
        return other[fn]
    for local, (file, fn) in sanitized.imports.items():
        namespace[local] = function(file, fn)
    for local, attrs in sanitized.modules.items():
        module = types.ModuleType(local)
        for attr, (file, value) in attrs.items():
            setattr(module, attr, function(file, value) if file else value)
        namespace[local] = module


def kernel_namespace(path: str | Path) -> dict:
    """The kernels of a file (and the helpers, constants and aliases they use), rebuilt from its AST.

    Nothing of the file runs (`tileport.capture.source`): kernels that would need it are left out
    (`reference_bytecode` says why)."""
    return _load(path)[0]


def reference_bytecode(path: str | Path, capture: Capture) -> bytes:
    """Tile IR bytecode of the cuTile Python kernel for the capture's signature (CPU only)."""
    namespace, sanitized = _load(path)
    if capture.kernel in sanitized.problems:
        raise CaptureError(f"`{capture.kernel}` cannot be captured without running its file: "
                           f"{sanitized.problems[capture.kernel]}")
    kernel = namespace.get(capture.kernel) if capture.kernel in sanitized.kernels else None
    if kernel is None:
        raise CaptureError(f"{path} has no kernel `{capture.kernel}`")
    try:
        return export_bytecode(kernel, capture)
    except Exception as e:  # noqa: BLE001 - cuTile's own diagnostics are passed on
        raise CaptureError(f"cuTile Python could not compile {capture.label}: {e}") from e


# The compilers whose own Tile IR export is a language's reference, by the name its frontend gives
# (`Frontend.reference_compiler`).
REFERENCE_COMPILERS = {"cuda.tile": reference_bytecode}


def frontend_reference(frontend: Any, path: str | Path, capture: Capture) -> bytes:
    """The reference Tile IR of one configuration, compiled by the frontend's language's own compiler."""
    export = REFERENCE_COMPILERS.get(frontend.reference_compiler)
    if export is None:
        raise CaptureError(f"{path}: {frontend.name} kernels have no reference Tile IR compiler")
    return export(path, capture)


def generic_arguments(entry: dict, capture: Capture) -> tuple[str, list[str]]:
    """The variant of a manifest entry that serves `capture`, and its generic argument list."""
    from tileport.dtypes import TORCH_DTYPES

    consts = dict(capture.constants)
    for variant in entry["variants"]:
        if all(consts.get(k) == v for k, v in variant["pinned"].items()) and _takes_dtypes(variant, capture):
            dvars = {}
            for name, (dt, _rank) in capture.arrays.items():
                generic = variant["array_dtypes"].get(name)
                if generic in variant["dtype_vars"]:
                    dvars[generic] = TORCH_DTYPES.get(dt, dt)
            for g, vals in variant["dtype_vars"].items():  # derived generics: from the arm the arrays select
                arm = next((i for i in range(len(vals)) if all(variant["dtype_vars"][d][i] == v
                                                                for d, v in dvars.items())), None)
                if g not in dvars and arm is not None:
                    dvars[g] = vals[arm]
            values = {**consts, **dvars}  # a constant named like a dtype generic (`E`) is pinned, never a generic
            for name, expr in variant["derived"].items():
                values[name] = _eval_dim(expr, consts)
            try:
                return variant["entry"], [_generic_text(values[g]) for g in variant["generics"]]
            except KeyError as e:
                raise CaptureError(f"{capture.label}: no value for generic {e}") from None
    raise CaptureError(f"{capture.label}: no specialized entry of `{entry['kernel']}` matches")


def _takes_dtypes(variant: dict, capture: Capture) -> bool:
    """The entry accepts the capture's array dtypes (entries of one kernel may be split by dtype)."""
    from tileport.dtypes import TORCH_DTYPES
    for name, (dt, _rank) in capture.arrays.items():
        declared = variant["array_dtypes"].get(name)
        allowed = variant["dtype_vars"].get(declared, [declared])
        if declared is not None and TORCH_DTYPES.get(dt, dt) not in allowed:
            return False
    return True


def _generic_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _eval_dim(expr: str, consts: dict) -> int:
    """A manifest's derived constant (a `Dim` as text, e.g. `(BLOCK // 2)`) for the given constants."""
    ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}

    def ev(n):
        if isinstance(n, ast.Constant):
            return int(n.value)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):  # a capture value -1 (a dynamic length)
            return -ev(n.operand)
        if isinstance(n, ast.Name):
            return int(consts[n.id])
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return dim_op(ops[type(n.op)], ev(n.left), ev(n.right))  # integers: the model's arithmetic
        raise CaptureError(f"cannot evaluate derived constant {expr!r}")
    return ev(ast.parse(expr, mode="eval").body)


def _entry(lib: KernelLibrary, capture: Capture, module: str | None = None) -> dict:
    """The manifest entry of the captured kernel; `module` (its Rust module) picks among kernels of the
    same name in several files of one crate."""
    entry = next((e for e in lib.manifest["entries"] if e["kernel"] == capture.kernel
                  and (module is None or e["module"] == module)), None)
    if entry is None:
        raise CaptureError(f"the generated library has no kernel `{capture.kernel}`"
                           + (f" in module `{module}`" if module else ""))
    return entry


def ir_entry_name(manifest: dict, entry: dict, name: str) -> str:
    """How `tileport_ir` knows the variant `name` of `entry`: `module::name` when another module of the crate
    has a variant of that name (emit.rust.crate.lib_rs's rule), else the name alone."""
    elsewhere = any(v["entry"] == name for e in manifest["entries"] if e["module"] != entry["module"]
                    for v in e["variants"])
    return f"{entry['module']}::{name}" if elsewhere else name


def generated_bytecode(lib: KernelLibrary, capture: Capture, target: str = "sm_90",
                       module: str | None = None) -> tuple[str, bytes]:
    """Tile IR of the cutile-rs port for the same signature, compiled on the CPU."""
    entry = _entry(lib, capture, module)
    name, generics = generic_arguments(entry, capture)
    return lib.ir(ir_entry_name(lib.manifest, entry, name), generics, target)


def generated_arg_roles(lib: KernelLibrary, capture: Capture, generated, module: str | None = None) -> dict[int, tuple]:
    """The shape/stride parameters of the generated entry (a read module), including the leading
    launcher-filled strides, for the IR diff."""
    from tileport.tileir.roles import manifest_generated_roles
    entry = _entry(lib, capture, module)
    name, _ = generic_arguments(entry, capture)
    variant = next(v for v in entry["variants"] if v["entry"] == name)
    return manifest_generated_roles(entry, variant, generated.entries[0])


def reference_arg_roles(lib: KernelLibrary, capture: Capture, reference, module: str | None = None) -> dict[int, tuple]:
    """The shape/stride parameters of the cuTile Python entry (a read module) for the IR diff."""
    from tileport.tileir.roles import cutile_python_roles
    return cutile_python_roles(_entry(lib, capture, module)["params"], reference.entries[0])


def diff_port(lib: KernelLibrary, capture: Capture, reference: bytes, generated: bytes, module: str | None = None):
    """The structural diff (a `tileport.tileir.DiffReport`) of one configuration's reference and generated
    Tile IR bytecode, with both entries' shape/stride parameter roles (what `verify` and stage B compare)."""
    from tileport.tileir import diff, read_module
    ref_module, gen_module = read_module(reference), read_module(generated)
    return diff(ref_module, gen_module, generated_arg_roles=generated_arg_roles(lib, capture, gen_module, module),
                reference_arg_roles=reference_arg_roles(lib, capture, ref_module, module))


def disassemble(bytecode: bytes) -> str:
    tool = toolchain.tileirdisasm()
    if tool is None:
        raise CaptureError("tileirdisasm not found (run: bash scripts/setup.sh)")
    with tempfile.NamedTemporaryFile(suffix=".tileirbc") as f:
        f.write(bytecode)
        f.flush()
        try:
            proc = run_tool([str(tool), f.name], DISASM_TIMEOUT_S, env=toolchain.env())
        except ToolTimeout as e:
            raise CaptureError(str(e)) from None
    if proc.returncode != 0:
        raise CaptureError(f"tileirdisasm failed: {proc.stderr.strip()}")
    return proc.stdout


@dataclass
class CubinResult:
    arch: str
    ok: bool
    size: int = 0
    sha256: str = ""
    error: str = ""
    sass: Sass | None = None  # the machine code, when asked for and disassembly worked
    sass_error: str = ""  # why there is no machine code although the cubin compiled


def compile_cubin(bytecode: bytes, arch: str, out: Path | None = None, sass: bool = True,
                  cache: DiskCache | None = None) -> CubinResult:
    """tileiras on the CPU; failures come back as a result with tileiras' message.

    `sass`: also disassemble the machine code (`tileport.sass`); a failed disassembly is recorded in
    `sass_error`, and `out` then also gets the listing (`<stem>.sass`). `cache`: tileiras' result for
    these bytes, this architecture and this tileiras, kept by content (`tileport.cache`)."""
    tool = toolchain.tileiras()
    if tool is None:
        return CubinResult(arch, False, error="tileiras not found (run: bash scripts/setup.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / "k.cubin"
        result = _cached_tileiras(tool, bytecode, arch, dst, cache)
        if not result.ok:
            return result
        if out is not None:
            out.write_bytes(dst.read_bytes())
        if sass:
            try:
                result.sass = disassemble_sass(dst, toolchain.nvdisasm(), toolchain.cuobjdump())
            except SassError as e:
                result.sass_error = str(e)
            if out is not None and result.sass is not None:
                out.with_suffix(".sass").write_text(sass_listing(result.sass))
        return result


def _cached_tileiras(tool: Path, bytecode: bytes, arch: str, dst: Path, cache: DiskCache | None) -> CubinResult:
    """tileiras' result (the cubin written to `dst`), from the cache when it holds it intact."""
    key = sha256("cubin", bytecode, arch, TILEIRAS_FLAGS, tool_key(tool))
    if cache is not None and (meta := cache.get("cubin", key, "json")) is not None:
        known = json.loads(meta)
        if not known["ok"]:
            return CubinResult(arch, False, error=known["error"])
        data = cache.get("cubin", key, "cubin")
        if data is not None and hashlib.sha256(data).hexdigest() == known["sha256"]:
            dst.write_bytes(data)
            return CubinResult(arch, True, len(data), known["sha256"])
    try:
        result = _tileiras(tool, bytecode, arch, dst)
    except ToolTimeout as e:  # not the compiler's answer for these bytes: not cached
        return CubinResult(arch, False, error=str(e))
    if cache is not None:
        if result.ok:
            cache.put("cubin", key, "cubin", dst.read_bytes())
        cache.put("cubin", key, "json", json.dumps({"ok": result.ok, "sha256": result.sha256,
                                                    "error": result.error}).encode())
    return result


def _tileiras(tool: Path, bytecode: bytes, arch: str, dst: Path) -> CubinResult:
    src = dst.with_suffix(".tileirbc")
    src.write_bytes(bytecode)
    proc = run_tool([str(tool), "--gpu-name", arch, *TILEIRAS_FLAGS, "-o", str(dst), str(src)], TILEIRAS_TIMEOUT_S,
                    env=toolchain.env())
    if proc.returncode != 0 or not dst.exists():
        return CubinResult(arch, False, error=(proc.stderr or proc.stdout).strip()[-2000:]
                           or f"tileiras exited with {proc.returncode}")
    data = dst.read_bytes()
    return CubinResult(arch, True, len(data), hashlib.sha256(data).hexdigest())


@dataclass
class SideCapture:
    bytecode: bytes
    text: str
    cubins: list[CubinResult] = field(default_factory=list)


def capture_side(bytecode: bytes, out_dir: Path | None, stem: str, archs=ARCHS,
                 cache: DiskCache | None = None) -> SideCapture:
    text = disassemble(bytecode)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    cubins = [compile_cubin(bytecode, a, out_dir / f"{stem}.{a}.cubin" if out_dir else None, cache=cache)
              for a in archs]
    if out_dir is not None:
        (out_dir / f"{stem}.tileirbc").write_bytes(bytecode)
        (out_dir / f"{stem}.tileir").write_text(text)
    return SideCapture(bytecode, text, cubins)


