"""Helpers shared by the stages: writing artifacts, reading them back, and the checks validators share."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from tileport.atomic import write_text_atomic

from .verdicts import Verdict, load_checked


class UnsafePathError(ValueError):
    """A path the pipeline would write or delete lies outside the output directory."""


def inside(root: Path, path: Path) -> Path:
    """`path`, checked to lie strictly inside `root` once both are resolved (symlinks followed)."""
    real_root, real = Path(root).resolve(), Path(path).resolve()
    if real == real_root or real_root not in real.parents:
        raise UnsafePathError(f"{path} is not inside the output directory {root}; refusing to touch it")
    return Path(path)


def remove_tree(root: Path, path: Path) -> None:
    """rmtree `path`, only if it lies inside `root` (a symlink is unlinked, never followed)."""
    path = Path(path)
    if path.is_symlink():
        inside(root, path.parent)
        path.unlink()
    elif path.exists():
        shutil.rmtree(inside(root, path))


def fresh_dir(path: Path) -> Path:
    if path.is_symlink():
        path.unlink()  # never empty the directory a link points to
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def write_json(path: Path, data: Any) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


SLUG_MAX = 150  # characters of a file name made from a label


def slug(text: str) -> str:
    """A file name for `text`; one cut to SLUG_MAX ends in a hash of the whole text, so labels that differ only
    past the cut (flash_decode's `..._SOFTCAP=False` / `=True`) keep distinct files."""
    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")
    if len(name) <= SLUG_MAX:
        return name
    return f"{name[:SLUG_MAX - 9]}_{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def ir_errors(path: Path, kernel: str) -> list[str]:
    """validate_ir.sh: a non-empty Tile IR text with an entry whose symbol contains the kernel name."""
    if not path.is_file() or path.stat().st_size == 0:
        return [f"{path.name}: missing or empty"]
    text = path.read_text(errors="replace")
    errors = []
    if not re.search(rf"entry @[A-Za-z0-9_]*{re.escape(kernel)}[A-Za-z0-9_]*", text):
        errors.append(f"{path.name}: no `entry @...{kernel}...`")
    for marker in ("Tile[PointerTy", "typed_const", "assume_bounded(x="):
        if marker in text:
            errors.append(f"{path.name}: Python-level IR marker `{marker}` (not Tile IR)")
    return errors


def stage_verdict(stage_dir: Path, loaded: Verdict | None = None) -> tuple[Verdict | None, list[str]]:
    """The stage's verdict.json, or the reasons it is unusable (missing, not JSON, not schema-valid).
    `loaded`: the verdict the caller already read this way (not read again)."""
    return (loaded, []) if loaded is not None else load_checked(stage_dir / "verdict.json")


def artifact_errors(kernel_dir: Path, verdict: Verdict) -> list[str]:
    """Every artifact the verdict names exists."""
    return [f"artifact `{name}` ({rel}) is missing" for name, rel in verdict.artifacts.items()
            if not (kernel_dir / rel).exists()]


def first_line_verdict(path: Path, allowed: tuple[str, ...], expected: str) -> list[str]:
    """Report files start with `VERDICT: X` (TileGym's convention, kept for human reports), X being
    one of `allowed` and the `expected` verdict of verdict.json."""
    if not path.is_file():
        return [f"{path.name}: missing"]
    first = path.read_text().splitlines()[:1]
    if not first or not re.fullmatch(rf"VERDICT: ({'|'.join(allowed)})", first[0].strip()):
        return [f"{path.name}: line 1 must be `VERDICT: <{'|'.join(allowed)}>`, got {first[:1]}"]
    said = first[0].split(": ", 1)[1]
    if said != expected:
        return [f"{path.name} says {said}, verdict.json {expected}"]
    return []
