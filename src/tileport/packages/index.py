"""The modules of a package tree: dotted name -> file, read from the folders (nothing is imported).

A file's module name is its path below the folder that holds its top package: the highest folder above
it in an unbroken chain of packages (`__init__.py`), namespace folders between packages included
(`sglang/kernels/ops/attention/fla/x.py`). Files of other vendors' back ends (`backends/_ascend/`,
`hip_gfx950/`, a module importing `torch_npu`) are indexed (their names still resolve) and marked, so that
package mode skips their kernels with a note.

`PackageResolver` answers the frontends' import questions (`frontends.imports.Resolver`) from the index:
relative imports by location, absolute ones by name, also when the package spells them from a root above
the tree given (`from sglang.srt.layers.x import f` for a tree whose names start at `layers`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tileport.frontends.imports import relative_base, vendor_of

# Folders that hold no package code: metadata, caches, version control, virtual environments.
SKIP_DIRS = re.compile(r"^(\..*|__pycache__|node_modules|site-packages|.*\.dist-info|.*\.egg-info)$")
KERNEL_TEXT = re.compile(r"\btriton\b|\bcuda\.tile\b|from\s+cuda\s+import\s+tile")  # files worth scanning


@dataclass(frozen=True)
class Module:
    name: str  # dotted module name ("liger_kernel.ops.rms_norm"; a package is its __init__)
    path: str  # absolute file path
    rel: str  # its path from the top package (what reports and generated files show, whatever the input)


@dataclass
class PackageIndex:
    root: Path
    modules: dict[str, Module] = field(default_factory=dict)  # dotted name -> module
    by_path: dict[str, Module] = field(default_factory=dict)  # absolute path -> module
    vendor: dict[str, str] = field(default_factory=dict)  # module name -> why it is another vendor's back end

    def kernel_candidates(self, vendor: bool = False) -> list[Module]:
        """Modules whose text names triton or cuda.tile (the others hold no kernel): those of other vendors'
        back ends with `vendor`, the others without."""
        out = []
        for m in self.modules.values():
            if (m.name in self.vendor) != vendor:
                continue
            try:
                with open(m.path, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            if KERNEL_TEXT.search(text):
                out.append(m)
        return out

    def top_packages(self) -> list[str]:
        return sorted({name.split(".")[0] for name in self.modules})


def build_index(root: Path, skip: Path | None = None) -> PackageIndex:
    """Every `.py` file under the folder `root` (folders of metadata, caches and environments left out, and
    `skip`: the run's output when it lies inside the package)."""
    root = root.resolve()
    index = PackageIndex(root)
    prefix = root_prefix(root)
    for path in _python_files(root, skip.resolve() if skip else None):
        name = base = module_name(path, root, prefix)
        for k in range(1, len(index.by_path) + 2):  # two files of one name (`a-b/x.py`, `a_b/x.py`): both kept
            if name not in index.modules:
                break
            name = f"{base}_{k}"
        depth = len(base.split(".")) + (path.name == "__init__.py")
        m = Module(name, str(path), "/".join(path.parts[-depth:]))
        index.modules[name] = m
        index.by_path[m.path] = m
        why = vendor_reason(path, root)
        if why:
            index.vendor[name] = why
    return index


def _python_files(root: Path, skip: Path | None) -> list[Path]:
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not SKIP_DIRS.match(d) and not os.path.islink(os.path.join(folder, d))
                         and Path(folder, d) != skip)
        out += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
    return out


MAX_NAMESPACE_DEPTH = 4  # namespace folders (no __init__.py) looked through above the tree's root


def root_prefix(root: Path) -> list[str] | None:
    """The module path of the tree's root when it lies in a package (`sglang/srt/layers`, whose `srt` and
    `layers` are namespace folders of the package `sglang`), else None."""
    chain, found, folder = [], None, root
    for _ in range(MAX_NAMESPACE_DEPTH + 1):
        if not folder.name.isidentifier():
            break
        chain.append(folder.name)
        if (folder / "__init__.py").is_file():
            found = len(chain)
        if folder == folder.parent:
            break
        folder = folder.parent
    return chain[:found][::-1] if found else None


def module_name(path: Path, root: Path, prefix: list[str] | None) -> str:
    """The dotted name Python imports `path` by: the root's module path and the path below it; for a root in
    no package, the path from the first package folder below it (`gemlite-0.6.0.post2/gemlite/core.py`:
    `gemlite.core`), else the path below the root. A folder that is no identifier (no module can be imported
    through it) is named with `_` for what it may not hold (`tests-data` -> `tests_data`)."""
    rel = path.relative_to(root)
    parts = list(rel.parts[:-1]) + ([] if path.name == "__init__.py" else [path.stem])
    if prefix is not None:
        names = prefix + parts
    else:
        first = next((i for i in range(len(rel.parts) - 1)
                      if (root.joinpath(*rel.parts[:i + 1]) / "__init__.py").is_file()), None)
        names = parts[first:] if first is not None else parts
    names = [n if n.isidentifier() else re.sub(r"\W|^(?=\d)", "_", n) for n in names]
    return ".".join(names) or "_"


# A module-level (unguarded: column 0) import, and the module it names.
TOP_IMPORT = re.compile(r"^(?:import|from)[ \t]+([A-Za-z_][\w.]*)", re.M)


def vendor_reason(path: Path, root: Path) -> str | None:
    """Why a file is another vendor's back end (a folder or file named for it, a module-level import of
    its runtime), None when it is not. An import under a guard (`try: import torch_npu`) is optional
    support, not a back end."""
    rel = path.relative_to(root)
    for part in rel.parts[:-1] + (rel.stem,):
        vendor = vendor_of(part)
        if vendor:
            return f"{vendor} back end (`{part}` in its path)"
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    for name in TOP_IMPORT.findall(text):
        vendor = vendor_of(name)
        if vendor:
            return f"{vendor} back end (imports `{name}`)"
    return None


class PackageResolver:
    """`frontends.imports.Resolver` over a package index (picklable: worker processes get it whole)."""

    def __init__(self, index: PackageIndex):
        self.index = index
        self.key = ("package", str(index.root))
        self._tops: set[str] | None = None

    def module_file(self, importer: str, module: str, level: int) -> str | None:
        if level > 0:
            return self._relative(importer, module, level)
        found = self.index.modules.get(module)
        if found is None:
            found = self.index.modules.get(self._from_outer_root(module) or "")
        return found.path if found else None

    def _relative(self, importer: str, module: str, level: int) -> str | None:
        base = relative_base(importer, level)
        target = base.joinpath(*module.split(".")) if module else base
        for candidate in (target / "__init__.py", target.with_suffix(".py") if module else None):
            if candidate is not None and str(candidate) in self.index.by_path:
                return str(candidate)
        return None

    def _from_outer_root(self, module: str) -> str | None:
        """`module` spelled from a root above the tree given (`sglang.srt.layers.x` when the tree's names
        start at `layers`): its part from the first of the tree's top packages."""
        if self._tops is None:
            self._tops = {name.split(".")[0] for name in self.index.modules}
        parts = module.split(".")
        start = next((i for i, part in enumerate(parts) if i and part in self._tops), None)
        return ".".join(parts[start:]) if start is not None else None

    def __getstate__(self):
        return {"index": self.index, "key": self.key, "_tops": None}
