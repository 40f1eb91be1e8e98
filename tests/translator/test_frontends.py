"""The frontend interface: the registry picks a file's frontend from its AST; each frontend declares its
passes (those that reproduce a language's own compiler run for that language only)."""

from __future__ import annotations

import ast

from tileport.frontends.cutile import FRONTEND
from tileport.frontends.registry import FRONTENDS, frontend_for
from tileport.passes.fma import fuse_fma
from tileport.passes.tokens import order_memory


def test_the_registry_gives_cutile_files_to_the_cutile_frontend(tmp_path):
    for text in ("import cuda.tile as ct\n", "from cuda import tile as ct\n", "from cuda.tile import kernel\n"):
        assert FRONTEND.accepts("k.py", ast.parse(text))
    assert not FRONTEND.accepts("k.py", ast.parse("import triton\n"))
    path = tmp_path / "k.py"
    path.write_text("import cuda.tile as ct\n")
    assert frontend_for(str(path)) is FRONTEND
    assert frontend_for(str(tmp_path / "missing.py")) is FRONTEND  # it reports the unreadable file itself


def test_frontends_have_unique_names_and_the_cutile_passes_are_its_own():
    assert len({f.name for f in FRONTENDS}) == len(FRONTENDS)
    assert FRONTEND.passes[-1] is order_memory and fuse_fma in FRONTEND.passes
