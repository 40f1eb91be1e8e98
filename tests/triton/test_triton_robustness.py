"""Broken Triton inputs (our kernels with lines deleted, duplicated or edited at random, fixed seeds) give
located diagnostics: never a traceback, never an internal error."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tileport.emit.rust.names import RUST_NAMING
from tileport.frontends.triton import translate_file

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for p in [*(ROOT / "src/tileport/ops/triton_kernels").glob("*.py"),
                             *(Path(__file__).parent / "data").glob("*.py")] if p.name != "__init__.py")
EDITS = [("+", "-"), ("*", "//"), ("<", ">="), ("BLOCK", "1"), ("0", "n"), ("mask", ""), ("[:, None]", "[None, :]"),
         ("axis=0", "axis=1"), (".to(tl.float32)", ".to(tl.int32)"), ("other=0.0", "other=x")]


def mutant(rng: random.Random) -> str:
    lines = rng.choice(SOURCES).read_text().splitlines()
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        r = rng.random()
        if r < 0.3:
            del lines[i]
        elif r < 0.6:
            old, new = rng.choice(EDITS)
            lines[i] = lines[i].replace(old, new, 1)
        else:
            lines.insert(i, lines[rng.randrange(len(lines))])
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(4))
def test_mutants_get_located_diagnostics(tmp_path, seed):
    rng = random.Random(seed)
    for i in range(25):
        path = tmp_path / f"m{i}.py"
        path.write_text(mutant(rng))
        tr = translate_file(str(path), naming=RUST_NAMING)
        for d in tr.diagnostics:
            assert d.loc is not None and d.loc.line >= 1, d
            assert d.construct != "internal", d
