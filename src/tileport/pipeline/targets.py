"""Which kernels a `tileport port` run works on, and what the operator library knows about them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from tileport.config import ConfigError, load_config
from tileport.frontends.cutile import KernelConfig, classify_params, scan_module
from tileport.dtypes import TORCH_DTYPES
from tileport.ops.spec import KERNELS_DIR, Capture

from .probe import SYNTHESIZED
from .target import Target, primary_op


class TargetError(ValueError):
    """The command line names nothing that can be ported (no file, no such kernel, no such op)."""


@lru_cache(maxsize=1)
def _library() -> tuple[dict, dict, dict]:
    from tileport.corpus import captures_by_kernel, kernel_configs
    from tileport.ops.specs import all_specs
    specs = all_specs()
    return specs, kernel_configs(specs), captures_by_kernel(specs)


def library_files() -> dict[Path, str]:
    """Resolved kernel file -> the path string the corpus translation uses for it."""
    specs, _, _ = _library()
    return {s.kernel_path.resolve(): str(s.kernel_path) for s in specs.values()}


def _library_target(path_str: str, kernel: str) -> Target:
    from tileport.corpus import repo_relative
    specs, configs, captures = _library()
    ops = sorted(op for op, s in specs.items() if kernel in s.kernels)
    caps = list(captures[kernel][1]) if kernel in captures else []
    return Target(kernel, kernel, Path(path_str), dict(configs.get(path_str, {})), caps,
                  f"spec:{','.join(ops)}" if ops else "default", ops, primary_op(kernel, specs, ops),
                  library=True, record_path=repo_relative)


def load_config_file(path: Path) -> dict[str, dict[str, Any]]:
    """--config FILE (JSON, TOML or YAML; format in tileport.config)."""
    try:
        return load_config(path)
    except ConfigError as e:
        raise TargetError(f"--config {e}") from None


def _short(v: Any) -> Any:
    return TORCH_DTYPES.get(v, v) if isinstance(v, str) else v


def load_launches(path: Path | None) -> list:
    """--launches SPEC: the launch records of a spec file (tileport record), or a usage error."""
    if path is None:
        return []
    from tileport.launches import LaunchSpecError, load_spec
    try:
        return load_spec(path)
    except LaunchSpecError as e:
        raise TargetError(f"--launches: {e}") from None


def _config_entry(capture: Capture) -> dict:
    """A translator configuration (short dtype names, constant values) of one capture."""
    entry = {n: TORCH_DTYPES.get(dt, dt) for n, (dt, _r) in capture.arrays.items()}
    entry.update({n: TORCH_DTYPES.get(dt, dt) for n, dt in capture.scalars.items()})
    entry.update(capture.constants)
    return entry


def kernel_launches(path: Path, kernels: list[str], spec_records: list, spec_path: Path | None) -> dict:
    """kernel -> (launch records, source, what inference could not derive): the spec's launches of
    the kernel, else the ones its file's host code fixes (static inference, nothing runs)."""
    from tileport.launches import for_kernel, infer_launches
    inference = infer_launches(path)
    out = {}
    for k in kernels:
        recs, source = for_kernel(spec_records, path, k), f"spec:{spec_path}"
        if not recs:
            recs, source = for_kernel(inference.records, path, k), "inferred"
        out[k] = (recs, source if recs else "", [m for m in inference.missing if m.kernel in (k, "")])
    return out


def file_targets(path: Path, kernel: str | None = None, config_file: Path | None = None,
                 ops_filter: list[str] | None = None, launches: Path | None = None,
                 spec_records: list | None = None) -> list[Target]:
    """The kernels of one cuTile Python file (one kernel if `kernel` is given).

    Outside the operator library, each kernel's launches come from the launch spec (`launches`,
    already read as `spec_records` when given), else from its file's host code; its configurations
    (reference IR, translation) come from those launches, else from --config, else defaults."""
    path = Path(path)
    if not path.is_file():
        raise TargetError(f"no such file: {path}")
    lib = library_files().get(path.resolve())
    if ops_filter and lib is None:
        raise TargetError(f"--op applies to the operator library's kernel files; {path} is not one "
                          "(describe its configurations with --config FILE.json)")
    try:
        kernels = source_kernels(path)
    except Exception as e:  # noqa: BLE001 - a syntax error is reported by stage A with its location
        kernels = [kernel] if kernel else []
        if not kernels:
            raise TargetError(f"{path}: {e}") from None
    if kernel:
        if kernel not in kernels:
            raise TargetError(f"{path} has no {'@triton.jit' if is_triton_file(path) else '@ct.kernel'} kernel "
                              f"`{kernel}` (kernels: {', '.join(kernels) or 'none'})")
        kernels = [kernel]
    if lib is not None and config_file is None:
        out = [_library_target(lib, k) for k in kernels]
        if ops_filter:
            out = [t for t in out if set(t.ops) & set(ops_filter)]
        return out
    cfg = load_config_file(config_file) if config_file else {}
    configs = {k: KernelConfig(tuple({n: _short(v) for n, v in c.items()} for c in cfg[k]["configs"]),
                               cfg[k]["ranks"]) for k in cfg}
    from tileport.launches import captures as launch_captures
    records = spec_records if spec_records is not None else load_launches(launches)
    found = kernel_launches(path, list(scan_kernels(path)) or kernels, records, launches)
    caps = {}
    for k, (recs, _src, _missing) in found.items():
        if recs:  # the launches give the configurations of the kernel (before --config)
            caps[k] = launch_captures(recs)
            configs[k] = KernelConfig(tuple(_config_entry(c) for c in caps[k]),
                                      {n: r for c in caps[k] for n, (_dt, r) in c.arrays.items()},
                                      launch_options=tuple(dict(r.options) for r in recs))
    probed = {k for k in kernels if k not in caps and k not in cfg and _probe(path, k, caps, configs)}
    out = []
    for k in kernels:
        recs, src, missing = found.get(k, ([], "", []))
        source = (f"launches:{src}" if k in caps and k not in probed else SYNTHESIZED if k in probed
                  else f"config:{config_file}" if k in cfg else "default")
        out.append(Target(k, k, path.resolve(), configs, caps.get(k, []), source,
                          config_entries=None if k in caps else cfg.get(k, {}).get("configs"),
                          launches=recs, launch_source=src, launch_missing=missing))
    return out


def _probe(path: Path, kernel: str, caps: dict, configs: dict) -> bool:
    """No launch and no --config, but ct.Constant parameters: values synthesized from the kernel's text
    (tileport.pipeline.probe), set as its captures and translator configuration. False when the kernel
    needs no probe (no constants: one capture per float dtype) or its signature cannot be read (A says why)."""
    from .probe import kernel_config, select
    try:
        sm = scan_module(str(path))
        fn = sm.kernels[kernel]
        params = classify_params(sm, fn, KernelConfig())
    except Exception:  # noqa: BLE001 - a signature or file stage A reports with its location
        return False
    if not any(p.is_const for p in params):
        return False
    chosen = select(path, sm, fn, params)
    caps[kernel] = chosen.captures  # empty when none compiles: stage A gives the located diagnostic
    if chosen.captures:
        configs[kernel] = kernel_config(chosen.captures)
    return True


def is_triton_file(path: Path) -> bool:
    """A Triton source (its kernels are `@triton.jit` functions; D/E test it against the Triton kernel)."""
    from tileport.frontends.triton import is_triton_source
    try:
        return is_triton_source(Path(path).read_text(errors="replace"))
    except OSError:
        return False


def source_kernels(path: Path) -> list[str]:
    """The kernels of a cuTile Python or Triton file (by its frontend's scan; raises if it does not parse)."""
    if is_triton_file(path):
        from tileport.frontends.triton.scan import scan
        return list(scan(str(path)).kernels)
    return list(scan_module(str(path)).kernels)


def scan_kernels(path: Path) -> list[str]:
    try:
        return source_kernels(path)
    except Exception:  # noqa: BLE001 - a file that does not parse: stage A reports it
        return []


def op_targets(op: str) -> list[Target]:
    from tileport.ops.specs import get_spec
    try:
        spec = get_spec(op)
    except KeyError as e:
        raise TargetError(str(e.args[0])) from None
    targets = file_targets(spec.kernel_path, ops_filter=[op])
    order = {k: i for i, k in enumerate(spec.kernels)}
    targets = [t for t in targets if t.kernel in order]
    for t in targets:
        if op in t.ops and t.primary_op != op and len(t.ops) > 1:
            t.primary_op = op  # --op: grade the kernel with this op's benchmark
    return sorted(targets, key=lambda t: order[t.kernel])


def corpus_targets(directory: Path, config_file: Path | None = None, launches: Path | None = None) -> list[Target]:
    directory = Path(directory)
    if not directory.is_dir():
        raise TargetError(f"--corpus {directory}: not a directory")
    records = load_launches(launches)
    out: list[Target] = []
    for f in sorted(directory.glob("*.py")):
        if f.name == "__init__.py":
            continue
        try:
            out += file_targets(f, config_file=config_file, spec_records=records)
        except TargetError:
            # the file does not parse: stage A reports the syntax error with its location
            out.append(Target(f"{f.stem}.file", "<file>", f.resolve(), {}, [], "default"))
    return out


def dedupe_keys(targets: list[Target]) -> list[Target]:
    """Unique directory names: kernels with the same name in different files get the file stem."""
    seen: dict[str, int] = {}
    for t in targets:
        seen[t.kernel] = seen.get(t.kernel, 0) + 1
    keys: set[str] = set()
    out = []
    for t in targets:
        if t.kernel == "<file>":
            key = f"{t.path.stem}.file"  # a file that does not parse
        else:
            key = t.kernel if seen[t.kernel] == 1 else f"{t.path.stem}.{t.kernel}"
        if key in keys:
            continue  # the same kernel named twice on the command line
        keys.add(key)
        t.key = key
        out.append(t)
    return out


def parse_spec(arg: str) -> tuple[Path, str | None]:
    """FILE[::kernel]"""
    if "::" in arg:
        f, k = arg.rsplit("::", 1)
        if k and not k.isidentifier():  # it names a folder under --out: never a path
            raise TargetError(f"{arg}: `{k}` is not a Python identifier (FILE.py::kernel_name)")
        return Path(f), k or None
    return Path(arg), None


def default_captures(params: list[dict], kernel: str, entries: list[dict] | None) -> tuple[list[Capture], str]:
    """Captures for a kernel outside the library: from --config entries, else one per float dtype.

    `params` are stage A's parameter records ({name, kind, rank, dtype}). Returns (captures, problem);
    `problem` is non-empty when no capture can be formed."""
    arrays = {p["name"]: p["rank"] for p in params if p["kind"] == "array"}
    scalars = {p["name"]: p["dtype"] for p in params if p["kind"] == "scalar"}
    consts = [p["name"] for p in params if p["kind"] == "const"]
    long = {v: k for k, v in TORCH_DTYPES.items()}
    caps = []
    if entries:
        for e in entries:
            missing = [n for n in list(arrays) + consts if n not in e]
            if missing:
                return [], f"configuration {e} gives no value for {', '.join(missing)}"
            caps.append(Capture(kernel, {n: (long.get(e[n], e[n]), r) for n, r in arrays.items()},
                                {n: long.get(e.get(n, dt), e.get(n, dt)) for n, dt in scalars.items()},
                                {n: e[n] for n in consts}))
        return caps, ""
    if consts:
        return [], (f"ct.Constant parameter(s) {', '.join(consts)} need values for the reference IR: record the "
                    "kernel's launches (`tileport record --out launches.json -- <your program>`, then --launches "
                    "launches.json), or give them with --config FILE.json ({\"" + kernel
                    + "\": [{\"PARAM\": value, \"array\": \"float16\"}]})")
    for dt in ("float32", "float16", "bfloat16"):
        caps.append(Capture(kernel, {n: (dt, r) for n, r in arrays.items()},
                            {n: long.get(d, d) for n, d in scalars.items()}, {}))
    return caps, ""


__all__ = ["TargetError", "file_targets", "op_targets", "corpus_targets", "dedupe_keys", "parse_spec",
           "default_captures", "library_files", "load_config_file", "load_launches", "kernel_launches", "KERNELS_DIR"]
