"""The reference corpus as translator input: kernel files plus the configurations their specs use."""

from __future__ import annotations

from pathlib import Path

from tileport.frontends.base import KernelConfig
from tileport.dtypes import TORCH_DTYPES
from tileport.ops.spec import KERNELS_DIR, Capture, OpSpec

REPO = Path(__file__).resolve().parents[2]


def _config_entry(c: Capture) -> dict:
    entry = {name: TORCH_DTYPES.get(dt, dt) for name, (dt, _rank) in c.arrays.items()}
    entry.update({name: TORCH_DTYPES.get(dt, dt) for name, dt in c.scalars.items()})
    entry.update(c.constants)
    return entry


def kernel_configs(specs: dict[str, OpSpec]) -> dict[str, dict[str, KernelConfig]]:
    """file path -> kernel -> the configurations (dtypes, constants) its captures use."""
    captures: dict[tuple[str, str], list[Capture]] = {}
    for spec in specs.values():
        for c in spec.captures:
            key = (str(spec.kernel_path), c.kernel)
            if c not in captures.setdefault(key, []):
                captures[key].append(c)
    out: dict[str, dict[str, KernelConfig]] = {}
    for (path, kernel), caps in sorted(captures.items()):
        ranks = {name: rank for c in caps for name, (_dt, rank) in c.arrays.items()}
        out.setdefault(path, {})[kernel] = KernelConfig(tuple(_config_entry(c) for c in caps), ranks)
    return out


def corpus_files(specs: dict[str, OpSpec]) -> list[str]:
    return sorted({str(s.kernel_path) for s in specs.values()})


def captures_by_kernel(specs: dict[str, OpSpec]) -> dict[str, tuple[Path, list[Capture]]]:
    """kernel -> (its file, every distinct capture of it across specs)."""
    out: dict[str, tuple[Path, list[Capture]]] = {}
    for spec in specs.values():
        for c in spec.captures:
            path, caps = out.setdefault(c.kernel, (spec.kernel_path, []))
            if c not in caps:
                caps.append(c)
    return out


def repo_relative(path) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return str(path)


def translate_corpus(out_dir: Path | None = REPO / "rust", faithful: bool = False):
    from tileport.ops.specs import all_specs
    from tileport.translate import translate

    specs = all_specs()
    return translate(corpus_files(specs), out_dir, kernel_configs(specs), record_path=repo_relative,
                     faithful=faithful)


__all__ = ["kernel_configs", "corpus_files", "captures_by_kernel", "translate_corpus", "KERNELS_DIR"]
