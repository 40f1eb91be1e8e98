"""Shared helpers of the translator tests: write a kernel file, translate it, cut the output apart."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence

from tileport.frontends.cutile import KernelConfig
from tileport.translate import TranslateReport, translate

HEADER = "import cuda.tile as ct\n\nConstInt = ct.Constant[int]\nConstBool = ct.Constant[bool]\n\n"


def write_kernels(tmp_path: Path, body: str, name: str = "kern.py", header: bool = True) -> Path:
    path = tmp_path / name
    path.write_text((HEADER if header else "") + textwrap.dedent(body).lstrip("\n"))
    return path


def kernel_configs(configs: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> dict[str, KernelConfig]:
    return {k: KernelConfig(tuple(v)) for k, v in (configs or {}).items()}


def run(path: Path, configs: Mapping[str, Sequence[Mapping[str, Any]]] | None = None, out_dir=None,
        crate: str = "tileport_kernels", faithful: bool = True) -> TranslateReport:
    """The translation of one file; `faithful` (the default here): the lowering spelled op by op, which these
    tests pin (the idiomatic rendering has tests of its own: test_idiomatic.py)."""
    return translate([str(path)], out_dir, {str(path): kernel_configs(configs)}, crate=crate, faithful=faithful)


def module_text(report: TranslateReport, path: Path) -> str:
    return report.files[f"src/{path.stem}.rs"]


def entry_text(module: str, entry: str) -> str:
    """One `#[cutile::entry]` function of an (unformatted) module, signature to closing brace."""
    start = module.index(f"    pub unsafe fn {entry}")
    end = module.index("\n    }\n", start)
    return module[start:end + 6]


def launcher_text(module: str, symbol: str) -> str:
    start = module.index(f'pub unsafe extern "C" fn {symbol}(')
    end = module.index("\n}\n", start)
    return module[start:end + 3]


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def has_line(text: str, pattern: str) -> bool:
    """A line equal to `pattern` (stripped); `{_}` in the pattern matches any identifier."""
    rx = re.compile("^" + re.escape(pattern).replace(re.escape("{_}"), r"[A-Za-z_][A-Za-z0-9_]*") + "$")
    return any(rx.match(line) for line in lines(text))


def body_of_loop(text: str, header_prefix: str) -> list[str]:
    """Stripped lines of the block opened by the first line starting with `header_prefix`."""
    raw = text.splitlines()
    i = next(n for n, line in enumerate(raw) if line.strip().startswith(header_prefix))
    indent = len(raw[i]) - len(raw[i].lstrip())
    out = []
    for line in raw[i + 1:]:
        if line.strip() == "}" and len(line) - len(line.lstrip()) == indent:
            break
        out.append(line.strip())
    return out
