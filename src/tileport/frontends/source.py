"""Reading and parsing a Python kernel file, every failure a located diagnostic (shared by the
frontends of Python-embedded languages)."""

from __future__ import annotations

import ast
import io
import os
import re
import stat
import tokenize
import warnings

from tileport.diagnostics import Diagnostic
from tileport.model.ir import Loc


# Kernel files are small; a larger input is refused before parsing (the parser, the emitter and rustfmt
# would otherwise spend minutes or overflow their stacks on it).
MAX_SOURCE_BYTES = 1 << 20


def read_source(path: str) -> str:
    """The text of a kernel file, decoded as Python does (PEP 263 cookie, UTF-8 BOM); Diagnostic if not."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise Diagnostic("not a regular file", Loc(path, 1, 1), "file", "give a .py kernel file")
        with open(path, "rb") as f:
            raw = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as e:
        raise Diagnostic(f"cannot read the file: {e.strerror or e}", Loc(path, 1, 1), "file") from None
    if len(raw) > MAX_SOURCE_BYTES:
        raise Diagnostic(f"the file is larger than {MAX_SOURCE_BYTES >> 20} MiB", Loc(path, 1, 1), "file size",
                         "split the kernels into several files")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(encoding)  # "utf-8-sig" when the file starts with a BOM: the BOM is dropped
    except SyntaxError as e:  # an unknown or contradictory coding cookie
        raise Diagnostic(f"bad source encoding: {e.msg}", Loc(path, e.lineno or 1, 1), "encoding",
                         "save the file as UTF-8") from None
    except UnicodeDecodeError as e:
        raise Diagnostic(f"the file is not valid {e.encoding}: byte 0x{raw[e.start]:02x}",
                         byte_loc(path, raw, e.start), "encoding",
                         "save the file as UTF-8 (or declare its encoding with a coding cookie)") from None


def byte_loc(path: str, raw: bytes, offset: int) -> Loc:
    line_start = raw.rfind(b"\n", 0, offset) + 1
    return Loc(path, raw.count(b"\n", 0, offset) + 1, offset - line_start + 1)


def parse_source(path: str, text: str) -> ast.Module:
    """`ast.parse`, with every way it can fail turned into a located Diagnostic."""
    try:
        with warnings.catch_warnings():  # SyntaxWarnings of user code are not the translator's to print
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes (Python < 3.12)
        if isinstance(e, SyntaxError) and e.lineno:
            loc = Loc(path, e.lineno, e.offset or 1)
        elif "\0" in text:
            loc = byte_loc(path, text.encode("utf-8", "replace"), text.encode("utf-8", "replace").find(b"\0"))
        else:
            loc = Loc(path, 1, 1)
        raise Diagnostic(f"syntax error: {getattr(e, 'msg', None) or e}", loc, "syntax") from None
    except (RecursionError, MemoryError):
        raise Diagnostic("an expression nests too deeply for the Python parser", longest_line(path, text),
                         "nesting", "split it into several statements") from None


# SyntaxErrors that are limits of the parser, not errors of the program.
PARSER_LIMITS = ("too many nested parentheses", "too many statically nested blocks")


def parse_module(path: str, text: str) -> tuple[ast.Module, list[Diagnostic]]:
    """The module's AST. When the parser hits one of its limits, every top-level statement is parsed on its
    own: only the definitions that hit it fail (their diagnostics come back, named after their kernel), the
    other kernels of the file still translate."""
    try:
        return parse_source(path, text), []
    except Diagnostic as d:
        chunks = top_level_statements(text) if d.construct == "nesting" or \
            any(limit in d.message for limit in PARSER_LIMITS) else None
        if not chunks:
            raise
    body, diagnostics = [], []
    for first_line, chunk in chunks:
        try:
            body += parse_source(path, "\n" * (first_line - 1) + chunk).body
        except Diagnostic as d:
            kernel = re.search(r"^@[\w.]*kernel\b.*?^def\s+(\w+)", chunk, re.M | re.S)
            d.kernel = kernel.group(1) if kernel else ""
            diagnostics.append(d)
    return ast.Module(body, []), diagnostics


def top_level_statements(text: str) -> list[tuple[int, str]] | None:
    """(first line, text) of each top-level statement (decorators with their definition); None if the
    text does not even tokenize."""
    starts, last = [], tokenize.NEWLINE
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            if last == tokenize.NEWLINE and tok.start[1] == 0:
                starts.append(tok.start[0])
            last = tok.type
    except (tokenize.TokenError, SyntaxError):
        return None
    lines = text.splitlines(keepends=True)
    merged, decorated = [], False
    for start in starts:
        if not decorated:
            merged.append(start)
        decorated = lines[start - 1].startswith("@")
    bounds = merged + [len(lines) + 1]
    return [(a, "".join(lines[a - 1:b - 1])) for a, b in zip(bounds, bounds[1:])]


def longest_line(path: str, text: str) -> Loc:
    """Where the parser most likely gave up: the logical line with the most tokens."""
    best, count, start = (1, 0), 0, 1
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                best = max(best, (start, count), key=lambda b: b[1])
                count, start = 0, tok.end[0] + 1
            elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                start = tok.start[0] if count == 0 else start
                count += 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return Loc(path, best[0], 1)
