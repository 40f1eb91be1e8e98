"""The translator's driver: source files -> frontend -> model -> the frontend's passes -> the generated crate.

Each kernel translates on its own: a kernel with a diagnostic is left out (and reported), the others
are still emitted. Nothing is written outside the output directory, and nothing half-written stays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from tileport.diagnostics import Diagnostic
from tileport.emit.rust.crate import ModuleSource, crate_name_error, render_crate, write_crate
from tileport.emit.rust.names import RUST_NAMING, module_name
from tileport.frontends.base import KernelConfig
from tileport.frontends.imports import Resolver
from tileport.frontends.registry import frontend_for
from tileport.model.ir import Kernel


@dataclass
class KernelResult:
    file: str
    kernel: str
    entries: list[str] = field(default_factory=list)
    diagnostic: Diagnostic | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # assumptions made without a configuration

    @property
    def ok(self) -> bool:
        return self.diagnostic is None


@dataclass
class TranslateReport:
    results: list[KernelResult]
    files: dict[str, str]  # generated files (relative path -> text), empty if nothing translated
    written: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


def lower(path: str, configs: Mapping[str, KernelConfig] | None = None,
          only: Sequence[str] | None = None, resolver: Resolver | None = None) -> tuple[list[Kernel], list[KernelResult]]:
    """Frontend + its passes for one file; timings are per source kernel. `resolver`: where the modules
    the file imports lie (`frontends.imports`)."""
    results: dict[str, KernelResult] = {}
    kernels: list[Kernel] = []
    t0 = time.perf_counter()
    frontend = frontend_for(path)
    tr = frontend.parse(path, configs, only, RUST_NAMING, resolver)
    for d in tr.diagnostics:
        results[d.kernel or "<file>"] = KernelResult(path, d.kernel or "<file>", diagnostic=d)
    for k in tr.module.kernels:
        base = k.base_name or k.name
        try:
            for rewrite in frontend.passes:
                rewrite(k, RUST_NAMING)
        except Diagnostic as d:
            results[base] = KernelResult(path, base, diagnostic=d)
            continue
        except Exception as e:  # noqa: BLE001 - a pass bug is reported for its kernel, the others go on
            results[base] = KernelResult(path, base, diagnostic=Diagnostic(
                f"internal translator error: {type(e).__name__}: {e}", k.loc, "internal", "please report this kernel",
                kernel=base))
            continue
        if base in results and not results[base].ok:
            continue
        r = results.setdefault(base, KernelResult(path, base))
        r.entries.append(k.name)
        r.notes += [n for n in k.notes if n not in r.notes]
        kernels.append(k)
    kernels = [k for k in kernels if results[k.base_name or k.name].ok]
    per_kernel = (time.perf_counter() - t0) / max(1, len(results))
    for r in results.values():
        r.seconds = per_kernel
    return kernels, list(results.values())


@dataclass
class Lowered:
    """One source file's translated kernels and per-kernel results, and its Rust module's name."""

    path: str
    kernels: list[Kernel]
    results: list[KernelResult]
    module: str  # Rust module name
    source: str  # source path recorded in the generated files


def translate(paths: Sequence[str], out_dir: str | Path | None,
              configs: Mapping[str, Mapping[str, KernelConfig]] | None = None,
              crate: str = "tileport_kernels", record_path=None, force: bool = False,
              only: Mapping[str, Sequence[str]] | None = None, faithful: bool = False) -> TranslateReport:
    """Translate every kernel of `paths`; write the crate to `out_dir` (None: render only).

    `configs` maps a file path to per-kernel configurations; `only` to the kernels to translate
    (every kernel of a file it does not name). `record_path(path)` gives the source
    path recorded in generated files (default: as given). Each file becomes one Rust module named
    after its stem (`emit.rust.names.module_name`: `a/k.py` and `b/k.py` become `k` and `k_1`). ValueError
    for an invalid crate name; `emit.rust.crate.OutputDirError` when `out_dir` cannot take the crate
    (a non-empty directory that tileport did not write needs `force`). `faithful`: the translation written
    one Tile IR operation per line (emit.rust.crate.render_crate), else its idiomatic rendering.
    """
    if error := crate_name_error(crate):
        raise ValueError(error)
    files, taken = [], set()
    for path in paths:
        kernels, res = lower(str(path), (configs or {}).get(str(path)), (only or {}).get(str(path)))
        name = module_name(Path(path).stem, taken) if kernels else ""
        files.append(Lowered(str(path), kernels, res, name, record_path(path) if record_path else str(path)))
    return assemble(files, out_dir, crate, force, faithful)


def assemble(files: Sequence[Lowered], out_dir: str | Path | None, crate: str = "tileport_kernels",
             force: bool = False, faithful: bool = False, stages: dict[str, float] | None = None
             ) -> TranslateReport:
    """The crate of translated files (one Rust module each), written to `out_dir` (None: render only); a
    kernel the emitter rejects gets its diagnostic in its result instead. `faithful` as in `translate`.
    `stages`: seconds of rendering ("render"), formatting ("rustfmt") and writing ("write") are added there."""
    if error := crate_name_error(crate):
        raise ValueError(error)
    mods, results, results_of_module = [], [], {}
    for f in files:
        results += f.results
        if f.kernels:
            for k in f.kernels:
                k.module_name = f.module
            mods.append(ModuleSource(f.module, f.source, f.kernels))
            results_of_module[f.module] = f.results
    failures: list = []
    stages = {} if stages is None else stages
    t0 = time.perf_counter()
    rendered = render_crate(mods, crate, failures, faithful) if mods else {}
    stages["render"] = stages.get("render", 0.0) + time.perf_counter() - t0
    for module, d in failures:  # matched within its file: other files may have kernels of the same name
        r = next(r for r in results_of_module[module] if r.kernel == d.kernel)
        r.diagnostic, r.entries = d, []
    try:
        written = write_crate(rendered, Path(out_dir), force, stages) if (out_dir is not None and rendered) else []
    except RuntimeError as e:  # rustfmt rejected the output: a translator bug, reported, never half-written
        for r in results:
            if r.ok:
                r.diagnostic = Diagnostic(f"internal translator error: {e}", None, "internal", "please report",
                                          kernel=r.kernel)
        return TranslateReport(results, {}, [])
    return TranslateReport(results, rendered, written)
