"""The frontends tileport knows, and which one reads a given file."""

from __future__ import annotations

import functools

from tileport.diagnostics import Diagnostic
from tileport.frontends.base import Frontend
from tileport.frontends.cutile import FRONTEND as CUTILE
from tileport.frontends.source import parse_source, read_source

# In the order they are asked; the first is also the one that reports on a file no frontend accepts.
FRONTENDS: tuple[Frontend, ...] = (CUTILE,)


def frontend_for(path: str) -> Frontend:
    """The frontend whose language `path` is written in (from its AST: nothing of it runs). A file that
    cannot be read or parsed, or that no frontend accepts, goes to the first frontend, which reports
    why with a location."""
    try:
        text = read_source(path)
    except Diagnostic:
        return FRONTENDS[0]
    return _frontend_of_text(path, text)


@functools.lru_cache(maxsize=256)
def _frontend_of_text(path: str, text: str) -> Frontend:
    """By content: a file translated kernel by kernel (stage B, the speed test) is parsed here once."""
    try:
        tree = parse_source(path, text)
    except Diagnostic:
        return FRONTENDS[0]
    return next((f for f in FRONTENDS if f.accepts(path, tree)), FRONTENDS[0])
