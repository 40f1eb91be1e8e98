"""Kernel-file generator for fuzzing the translator: well-formed kernels from the corpus' vocabulary, and
mutated or garbage variants of them (token edits, deep nesting, huge constants, bad encodings).

Everything is a function of one `random.Random`, so an input is reproduced from (seed, index).
"""

from __future__ import annotations

import ast
import io
import random
import tokenize
from dataclasses import dataclass

HEADER = "import math\n\nimport cuda.tile as ct\n\nConstInt = ct.Constant[int]\nConstBool = ct.Constant[bool]\n"
FLOAT_UNARY = ["ct.exp({t})", "ct.exp2({t})", "ct.log({t})", "ct.sqrt({t})", "ct.rsqrt({t})", "ct.tanh({t})",
               "ct.abs({t})", "-{t}", "ct.exp({t}, rounding_mode=ct.RoundingMode.APPROX)",
               "ct.sqrt({t}, flush_to_zero=True)", "1.0 / (1.0 + ct.exp(-{t}))"]
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "ct.maximum({a}, {b})", "ct.minimum({a}, {b})",
          "ct.add({a}, {b}, flush_to_zero=True)", "ct.truediv({a}, {b}, rounding_mode=ct.RoundingMode.APPROX)",
          "ct.where({a} > {b}, {a}, {b})"]
SCALARS = ["2.0", "0.5", "-1.5", "SCALE", "EPS", "float('inf')", "1e-6", "3"]
PADDING = ["ZERO", "NEG_INF", "POS_INF", "NAN", "NEG_ZERO"]
# Tokens a mutation may insert: pieces of the vocabulary and classic troublemakers.
JUNK_TOKENS = ["(", ")", "[", "]", ",", ":", "=", "+", "*", "**", "//", "<<", "-", "not", "if", "else", "for",
               "in", "range", "ct", ".", "T", "shape", "0", "1", "-1", "2**62", "1.5", "True", "None", "'s'",
               "x", "y", "t", "TILE", "ct.bid", "ct.load", "ct.store", "lambda", "yield", "while", "return",
               "10 ** 10 ** 10", "1 << 2**40", "1 // 0", "math.exp(1000)", "ct.float8_e4m3fn",
               "ct.PaddingMode.BOGUS", "fn", "_", "1000000000000000000000000000000", "-0.0", "\\", "'''"]


@dataclass
class FuzzInput:
    kind: str  # "valid", "semantic", "mutated", "nested", "constants", "encoding", "garbage"
    data: bytes


class KernelGen:
    """One random, well-formed kernel file."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.names = 0
        self.has_helper = False

    def fresh(self, base: str) -> str:
        self.names += 1
        return f"{base}{self.names}"

    def file(self, kernels: int) -> str:
        r = self.rng
        parts = [HEADER, f"SCALE = {r.choice(['0.5', '2.0', 'math.sqrt(2.0)', '1 / 3', '2 ** -3'])}",
                 f"EPS = {r.choice(['1e-6', '1e-5', '0.0'])}", f"BLOCK = {r.choice(['16', '32', '2 ** 6'])}", ""]
        self.has_helper = r.random() < 0.5
        if self.has_helper:
            parts += ["", "def helper(t, s):", f"    return {self.binary('t', 's')}", ""]
        for i in range(kernels):
            parts += ["", self.kernel(f"kernel_{i}"), ""]
        return "\n".join(parts)

    def binary(self, a: str, b: str) -> str:
        return self.rng.choice(BINARY).format(a=a, b=b)

    def kernel(self, name: str) -> str:
        r = self.rng
        rank = r.choice([1, 1, 2])
        shape = "(TILE,)" if rank == 1 else r.choice(["(BLOCK_M, TILE)", "(2, TILE)", "(BLOCK, TILE)"])
        index = "(i,)" if rank == 1 else "(i, 0)"
        consts = "TILE: ConstInt" + (", BLOCK_M: ConstInt" if "BLOCK_M" in shape else "")
        opts = r.choice(["", "(occupancy=2)", "(num_ctas=1)"])
        lines = [f"@ct.kernel{opts}", f"def {name}(x, y, n, {consts}):", "    i = ct.bid(0)"]
        pad = f", padding_mode=ct.PaddingMode.{r.choice(PADDING)}" if r.random() < 0.3 else ""
        lines.append(f"    t = ct.astype(ct.load(x, index={index}, shape={shape}{pad}), ct.float32)")
        live = ["t"]
        for _ in range(r.randint(1, 6)):
            lines += ["    " + s for s in self.statement(live, rank)]
        if r.random() < 0.3:
            acc = self.fresh("acc")
            lines += [f"    {acc} = ct.zeros({shape}, dtype=ct.float32)", "    for k in range(n):",
                      f"        {acc} = {acc} + {r.choice(live)}"]
            live.append(acc)
        if r.random() < 0.25:
            lines += ["    if i < n:", f"        t = {self.binary(r.choice(live), r.choice(SCALARS))}",
                      "    else:", f"        t = {r.choice(live)}"]
        lines.append(f"    ct.store(y, index={index}, tile=ct.astype({r.choice(live)}, y.dtype))")
        return "\n".join(lines)

    def statement(self, live: list[str], rank: int) -> list[str]:
        r = self.rng
        src = r.choice(live)
        out = self.fresh("v")
        roll = r.random()
        if roll < 0.3:
            expr = r.choice(FLOAT_UNARY).format(t=src)
        elif roll < 0.6:
            expr = self.binary(src, r.choice(live + SCALARS))
        elif roll < 0.7 and self.has_helper:
            expr = f"helper({src}, {r.choice(SCALARS)})"
        elif roll < 0.85 and rank == 2:
            red = r.choice(["ct.sum", "ct.max", "ct.min"])
            expr = f"{src} - {red}({src}, 1, keepdims=True)"
        elif roll < 0.9 and rank == 2:
            expr = f"ct.transpose(ct.transpose({src}))"
        else:
            expr = f"ct.astype(ct.astype({src}, ct.float16), ct.float32)"
        live.append(out)
        return [f"{out} = {expr}"]


# Expressions an AST mutation puts in place of another one: values of every kind the frontend meets, legal
# or not in that position.
VALUES = ["0", "1", "-1", "3", "2 ** 62", "-0.0", "1.5", "True", "None", "'C'", "'F'", "()", "(1, 2)", "(16,)",
          "(3,)", "(-8,)", "(16, 16)", "x", "y", "n", "t", "TILE", "ct.bid(0)", "ct.num_blocks(0)", "ct.float32",
          "ct.float16", "ct.float8_e4m3fn", "ct.int32", "ct.int64", "ct.bool_", "ct.PaddingMode.ZERO",
          "ct.RoundingMode.APPROX", "ct.MemoryOrder.ACQUIRE", "x.shape", "x.shape[0]", "x.shape[-1]", "x.dtype",
          "t.shape", "t.T", "t.dtype", "ct.arange(16, dtype=ct.int32)", "ct.zeros((16,), dtype=ct.float32)",
          "ct.full((16, 16), 1, dtype=ct.int32)", "t > 0.0", "math.pi", "float('nan')", "float('inf')",
          "1000000000000000000000000000000", "ct", "math", "helper", "range", "len", "lambda: 0", "[t]", "{}",
          "x[0]", "t[:, None]", "t[0]", "t[None, :]", "ct.load", "abs", "...", "TILE * 2", "TILE // 0", "TILE - 3",
          "n // 2", "n % 3", "-n", "not n", "n and t", "t if n else t", "ct.sum(t)", "ct.max(t, 0, keepdims=True)",
          "ct.astype(t, ct.int32)", "ct.astype(t, ct.bool_)", "ct.reshape(t, (-1,))", "ct.mma(t, t, t)", "t @ t",
          "ct.transpose(t)", "ct.permute(t, (1, 0))", "ct.extract(t, (0,), (4,))", "ct.where(t, t, t)",
          "ct.gather(x, ct.arange(16, dtype=ct.int32))", "ct.cdiv(n, 16)", "min(n, TILE)", "max(TILE, 16)",
          "int(1.5)", "bool(t)", "len(t)", "t.reshape(4, 4)", "t.astype(ct.float16)", "t.sum()", "ct.exp(n)"]
KEYWORDS = ["axis", "shape", "dtype", "padding_mode", "latency", "keepdims", "order", "rounding_mode",
            "flush_to_zero", "check_bounds", "allow_tma", "mask", "index", "tile", "memory_order", "bogus"]


def _expression_slots(tree: ast.AST) -> list[tuple[ast.AST, str, int | None]]:
    """(parent, field, index) of every expression inside a function (where the frontend looks)."""
    slots = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for parent in ast.walk(fn):
            for name, value in ast.iter_fields(parent):
                if isinstance(value, ast.expr):
                    slots.append((parent, name, None))
                elif isinstance(value, list):
                    slots += [(parent, name, i) for i, v in enumerate(value) if isinstance(v, ast.expr)]
    return slots


def _statement_lists(tree: ast.AST) -> list[list[ast.stmt]]:
    return [n.body for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.For, ast.If)) and n.body]


def semantic(rng: random.Random, text: str) -> str:
    """Well-formed Python that is hostile to the frontend: expressions swapped for values of other kinds,
    keywords added or dropped, statements deleted, duplicated or moved into loops and branches."""
    tree = ast.parse(text)
    for _ in range(rng.choice([1, 1, 2, 3, 5])):
        op = rng.choice(["expr", "expr", "expr", "keyword", "drop_arg", "stmt"])
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        if op == "expr":
            parent, name, i = rng.choice(_expression_slots(tree))
            new = ast.parse(rng.choice(VALUES), mode="eval").body
            if i is None:
                setattr(parent, name, new)
            else:
                getattr(parent, name)[i] = new
        elif op == "keyword" and calls:
            value = ast.parse(rng.choice(VALUES), mode="eval").body
            rng.choice(calls).keywords.append(ast.keyword(rng.choice(KEYWORDS), value))
        elif op == "drop_arg" and calls:
            call = rng.choice(calls)
            if call.args and rng.random() < 0.5:
                call.args.pop(rng.randrange(len(call.args)))
            elif call.keywords:
                call.keywords.pop(rng.randrange(len(call.keywords)))
        elif op == "stmt":
            body = rng.choice(_statement_lists(tree))
            k = rng.randrange(len(body))
            how = rng.choice(["delete", "duplicate", "loop", "branch"])
            if how == "delete" and len(body) > 1:
                del body[k]
            elif how == "duplicate":
                body.insert(k, body[k])
            elif how == "loop":
                body[k] = ast.For(ast.Name("k9", ast.Store()), ast.parse("range(n)", mode="eval").body, [body[k]], [])
            else:
                body[k] = ast.If(ast.parse(rng.choice(["n > 0", "TILE > 16", "True", "t"]), mode="eval").body,
                                 [body[k]], [])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _tokens(text: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.string]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text.split()


def mutate(rng: random.Random, text: str) -> str:
    """Random token edits of a valid file, kept on its lines so that most of it still parses."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 4)):
        n = rng.randrange(len(lines))
        toks = _tokens(lines[n].strip()) or [""]
        indent = lines[n][: len(lines[n]) - len(lines[n].lstrip())]
        op = rng.choice(["delete", "duplicate", "swap", "replace", "insert"])
        k = rng.randrange(len(toks))
        if op == "delete":
            del toks[k]
        elif op == "duplicate":
            toks.insert(k, toks[k])
        elif op == "swap" and len(toks) > 1:
            j = rng.randrange(len(toks))
            toks[k], toks[j] = toks[j], toks[k]
        else:
            junk = rng.choice(JUNK_TOKENS)
            if op == "replace":
                toks[k] = junk
            else:
                toks.insert(k, junk)
        lines[n] = indent + " ".join(toks)
    return "\n".join(lines) + "\n"


def nested(rng: random.Random, base: str) -> str:
    """Deep nesting: parentheses, long operator chains, helper towers, nested blocks."""
    depth = rng.choice([50, 150, 500, 1000, 3000, 6000])
    shape = rng.choice(["paren", "chain", "tower", "blocks", "unary", "calls"])
    if shape == "paren":
        expr = "(" * depth + "t" + ")" * depth
    elif shape == "chain":
        expr = " + ".join(["t"] * depth)
    elif shape == "unary":
        expr = "-" * depth + "t"
    elif shape == "calls":
        expr = "ct.exp(" * depth + "t" + ")" * depth
    elif shape == "tower":
        levels = rng.randint(8, 20)
        helpers = ["def h0(t):", "    return t + 1.0"]
        for i in range(1, levels + 1):
            helpers += ["", f"def h{i}(t):", f"    return h{i - 1}(t) * h{i - 1}(t)"]
        return base.replace(HEADER, HEADER + "\n" + "\n".join(helpers) + "\n", 1).replace(
            "    i = ct.bid(0)", f"    i = ct.bid(0)\n    t0 = h{levels}(1.0)", 1)
    else:
        body = []
        for d in range(min(depth, 120)):
            body.append("    " * (d + 1) + f"for k{d} in range(n):")
        body.append("    " * (min(depth, 120) + 1) + "t = t + 1.0")
        return base.replace("    i = ct.bid(0)", "    i = ct.bid(0)\n    t = ct.load(x, index=(i,), shape=(16,))\n"
                            + "\n".join(body), 1)
    return base.replace("    i = ct.bid(0)", f"    i = ct.bid(0)\n    t = ct.load(x, index=(i,), shape=(16,))\n"
                        f"    u = {expr}", 1)


def constants(rng: random.Random, base: str) -> str:
    """Huge, overflowing or ill-typed constants, at module level and in a kernel."""
    value = rng.choice(["10 ** 10 ** 10", "2.0 ** 10000", "1 << 2 ** 40", "math.exp(1000)", "1 // 0", "1 % 0",
                        "(-8) ** 0.5", "math.log(-1)", "9" * 5000, "1e400", "-1e400", "2 ** 63", "2 ** 64",
                        "'hello world'", "'ct.Constant[int'", "None", "(1, 2)", "[1] * 10 ** 9", "'a' * 10 ** 9",
                        " + ".join(["1"] * 1000), "math.sqrt(10 ** 400)", "float('nan')", "True << 100",
                        "10 ** -400", "0.0 ** -1", "int('9' * 4000)"])
    where = rng.choice(["module", "kernel", "shape", "index"])
    if where == "module":
        return base.replace("BLOCK = ", f"BIG = {value}\nBLOCK = BIG * 0 + ", 1)
    stmt = {"kernel": f"c = {value}", "shape": f"c = ct.full(({value},), 1.0, dtype=ct.float32)",
            "index": f"c = ct.load(x, index=({value},), shape=(16,))"}[where]
    return base.replace("    i = ct.bid(0)", f"    i = ct.bid(0)\n    {stmt}", 1)


def encoding(rng: random.Random, text: str) -> bytes:
    """Bytes that are not plain UTF-8 source: latin-1, BOMs, null bytes, cookies, truncated UTF-8."""
    data = text.encode()
    roll = rng.choice(["latin1", "bom", "null", "cookie", "bad_cookie", "truncated", "utf16", "crlf"])
    at = rng.randrange(len(data))
    if roll == "latin1":
        return data[:at] + b"# caf\xe9\n" + data[at:]
    if roll == "bom":
        return b"\xef\xbb\xbf" + data
    if roll == "null":
        return data[:at] + b"\x00" + data[at:]
    if roll == "cookie":
        return b"# -*- coding: latin-1 -*-\n" + data + b"# caf\xe9\n"
    if roll == "bad_cookie":
        return b"# -*- coding: no-such-codec -*-\n" + data
    if roll == "truncated":
        return data + "\u00e9".encode()[:1]
    if roll == "utf16":
        return text.encode("utf-16")
    return data.replace(b"\n", b"\r\n")


def garbage(rng: random.Random) -> bytes:
    n = rng.choice([0, 1, 10, 1000, 50_000])
    if rng.random() < 0.5:
        return bytes(rng.randrange(256) for _ in range(n))
    return "".join(rng.choice(JUNK_TOKENS + [" ", "\n", "    "]) for _ in range(n // 4)).encode()


KINDS = (("valid", 0.15), ("semantic", 0.35), ("mutated", 0.2), ("nested", 0.1), ("constants", 0.1),
         ("encoding", 0.07), ("garbage", 0.03))


def generate(seed: int, index: int) -> FuzzInput:
    """Input number `index` of the run seeded `seed`."""
    rng = random.Random(f"{seed}:{index}")
    kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
    base = KernelGen(rng).file(rng.randint(1, 3))
    if kind == "valid":
        return FuzzInput(kind, base.encode())
    if kind == "semantic":
        return FuzzInput(kind, semantic(rng, base).encode())
    if kind == "mutated":
        return FuzzInput(kind, mutate(rng, base).encode())
    if kind == "nested":
        return FuzzInput(kind, nested(rng, base).encode())
    if kind == "constants":
        return FuzzInput(kind, constants(rng, base).encode())
    if kind == "encoding":
        return FuzzInput(kind, encoding(rng, base))
    return FuzzInput(kind, garbage(rng))
