"""Launches inferred from a kernel file's own host code, with `ast` only (nothing of the file runs).

Inference (`infer_launches`) reads the file with `ast` only: it finds `ct.launch(stream, grid, kernel,
(args...))` call sites and derives what it can from literals, module constants, assignments in the
enclosing function (or top-level `if __name__ == "__main__":` block) before the call, the values the
file's own callers of that function pass (one level up), else parameter defaults, and array
constructors (`torch.empty/zeros/ones/randn/rand/full/randint/empty_like...` with `dtype=`). Whatever
it cannot derive is a located `missing` entry; a launch site with something missing yields no record.
"""

from __future__ import annotations

import ast
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .spec import DTYPE_NAMES, LaunchArg, LaunchRecord, LaunchSpecError, grid3, merge


@dataclass
class Missing:
    """Something an inferred launch needs that the host code does not determine."""

    what: str
    file: str
    line: int
    col: int
    hint: str = ""
    kernel: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.what}" + (f" (hint: {self.hint})" if self.hint else "")


@dataclass
class Inference:
    records: list[LaunchRecord] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    sites: int = 0

    def to_dict(self) -> dict:
        return {"sites": self.sites, "records": [r.to_dict() for r in self.records],
                "missing": [asdict(m) for m in self.missing]}


class _Unknown(Exception):
    def __init__(self, node: ast.AST, what: str):
        super().__init__(what)
        self.node, self.what = node, what


@dataclass
class _Array:
    dtype: str
    shape: tuple[int, ...]

    @property
    def strides(self) -> list[int]:
        out, acc = [], 1
        for n in reversed(self.shape):
            out.append(acc)
            acc *= max(n, 1)
        return out[::-1]


ARRAY_MAKERS = {"empty", "zeros", "ones", "randn", "rand", "full", "randint", "empty_strided", "arange"}
LIKE_MAKERS = {"empty_like", "zeros_like", "ones_like", "randn_like", "rand_like", "full_like"}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b,
           ast.Div: lambda a, b: a / b, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b}
_FUNCS = {"cdiv": lambda a, b: -(-a // b), "ceil": math.ceil, "min": min, "max": max, "int": int, "float": float,
          "next_power_of_2": lambda n: 1 << max(int(n) - 1, 0).bit_length(), "abs": abs}


class _Evaluator:
    """Evaluates host-code expressions over statically known values; raises _Unknown otherwise."""

    def __init__(self, env: dict[str, Any]):
        self.env = env

    def __call__(self, node: ast.AST) -> Any:
        m = getattr(self, f"_{type(node).__name__}", None)
        if m is None:
            raise _Unknown(node, f"`{ast.unparse(node)}` is not a value tileport can derive statically")
        try:
            return m(node)
        except (TypeError, ValueError, ArithmeticError, IndexError, KeyError) as e:
            raise _Unknown(node, f"`{ast.unparse(node)}` cannot be evaluated: {type(e).__name__}: {e}") from None

    def _Constant(self, n):
        return n.value

    def _Name(self, n):
        if n.id not in self.env:
            raise _Unknown(n, f"the value of `{n.id}` is not known statically")
        v = self.env[n.id]
        if isinstance(v, _Unknown):  # located where the launch uses it, unless its definition says more
            raise _Unknown(n, v.what) if isinstance(v.node, (ast.FunctionDef, ast.arg)) else v
        return v

    def _Tuple(self, n):
        return tuple(self(e) for e in n.elts)

    _List = _Tuple

    def _UnaryOp(self, n):
        v = self(n.operand)
        if isinstance(n.op, ast.USub):
            return -v
        if isinstance(n.op, ast.UAdd):
            return v
        if isinstance(n.op, ast.Not):
            return not v
        raise _Unknown(n, f"operator in `{ast.unparse(n)}`")

    def _BinOp(self, n):
        f = _BINOPS.get(type(n.op))
        if f is None:
            raise _Unknown(n, f"operator in `{ast.unparse(n)}`")
        a, b = self(n.left), self(n.right)
        if not all(isinstance(x, (int, float)) for x in (a, b)):
            raise _Unknown(n, f"`{ast.unparse(n)}` is arithmetic on values that are not numbers")
        if isinstance(n.op, (ast.Pow, ast.LShift)) and not (abs(b) <= 128 and abs(a) < 2**64):
            raise _Unknown(n, f"`{ast.unparse(n)}` is too large to be a launch value")
        return f(a, b)

    def _Subscript(self, n):
        base = self(n.value)
        idx = self(n.slice)
        if isinstance(base, _Array):
            raise _Unknown(n, f"`{ast.unparse(n)}` indexes an array")
        return base[idx]

    def _Attribute(self, n):
        dotted = ast.unparse(n)
        head, _, attr = dotted.rpartition(".")
        if head.split(".")[0] in ("torch", "np", "numpy", "ct", "cuda") and attr in DTYPE_NAMES:
            return ("dtype", DTYPE_NAMES[attr])
        base = self(n.value)
        if isinstance(base, _Array):
            if n.attr == "shape":
                return base.shape
            if n.attr == "dtype":
                return ("dtype", base.dtype)
        raise _Unknown(n, f"`{dotted}` is not known statically")

    def _Call(self, n):
        name = n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id if isinstance(n.func, ast.Name) else ""
        if name in _FUNCS:
            return _FUNCS[name](*[self(a) for a in n.args])
        if name in ARRAY_MAKERS | LIKE_MAKERS:
            return self._array(n, name)
        if name in ("size", "numel") and isinstance(n.func, ast.Attribute):
            base = self(n.func.value)
            if isinstance(base, _Array):
                return base.shape[self(n.args[0])] if n.args else math.prod(base.shape)
        raise _Unknown(n, f"the call `{ast.unparse(n)}` is not evaluated statically")

    def _array(self, n: ast.Call, name: str) -> _Array:
        kw = {k.arg: k.value for k in n.keywords if k.arg}
        dtype = None
        if "dtype" in kw:
            d = self(kw["dtype"])
            dtype = d[1] if isinstance(d, tuple) and d and d[0] == "dtype" else None
            if dtype is None:
                raise _Unknown(kw["dtype"], f"dtype `{ast.unparse(kw['dtype'])}` is not known statically")
        if name in LIKE_MAKERS:
            base = self(n.args[0])
            if not isinstance(base, _Array):
                raise _Unknown(n.args[0], f"`{ast.unparse(n.args[0])}` is not a known array")
            return _Array(dtype or base.dtype, base.shape)
        if name == "randint":  # randint(low, high, size) / randint(high, size)
            size = self(kw["size"]) if "size" in kw else self(n.args[-1])
            return _Array(dtype or "int64", tuple(int(x) for x in (size if isinstance(size, tuple) else (size,))))
        if name == "arange":
            vals = [self(a) for a in n.args]
            return _Array(dtype or ("int64" if all(isinstance(v, int) for v in vals) else "float32"),
                          (len(range(*[int(v) for v in vals])),))
        shape_args = n.args[:1] if name in ("full", "empty_strided") else n.args
        if "size" in kw:
            shape_args = [kw["size"]]
        dims: list[int] = []
        for a in shape_args:
            v = self(a)
            dims += list(v) if isinstance(v, tuple) else [v]
        if dtype is None:
            raise _Unknown(n, f"`{ast.unparse(n)}` gives no dtype= (the default dtype depends on the framework)")
        return _Array(dtype, tuple(int(x) for x in dims))


def _module_env(tree: ast.Module) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                env[node.targets[0].id] = _Evaluator(env)(node.value)
            except _Unknown as e:
                env[node.targets[0].id] = e
    return env


def _enclosing_functions(tree: ast.Module) -> dict[ast.Call, ast.FunctionDef | None]:
    out: dict[ast.Call, ast.FunctionDef | None] = {}

    def walk(node, fn):
        for child in ast.iter_child_nodes(node):
            f = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            if isinstance(child, ast.Call):
                out[child] = fn
            walk(child, f)
    walk(tree, None)
    return out


def _is_launch(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr == "launch" and ast.unparse(f.value) in ("ct", "cuda.tile")) or (
        isinstance(f, ast.Name) and f.id == "launch")


def _param_env(fn: ast.FunctionDef, module_env: dict, bound: dict[str, Any] | None) -> dict[str, Any]:
    """Module values, then the function's parameters: the values a caller binds, else their defaults."""
    env = dict(module_env)
    args = fn.args.posonlyargs + fn.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(fn.args.defaults):]], fn.args.defaults))
    defaults.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None})
    for a in args + fn.args.kwonlyargs:
        if bound is not None and a.arg in bound:
            env[a.arg] = bound[a.arg]
        elif a.arg in defaults:
            try:
                env[a.arg] = _Evaluator(env)(defaults[a.arg])
            except _Unknown as e:
                env[a.arg] = e
        else:
            env[a.arg] = _Unknown(a, f"parameter `{a.arg}` of `{fn.name}` has no default"
                                     + (" and its caller does not pass it" if bound is not None else ""))
    return env


def _scope_env(body: list[ast.stmt], scope: ast.AST, env: dict[str, Any], before: ast.AST) -> dict[str, Any]:
    """`env` updated by the straight-line assignments of `body` before `before`; a name assigned more
    than once, or inside a loop / branch, or after `before`, is not known."""
    env = dict(env)
    counts: dict[str, int] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    known: set[str] = set()
    for stmt in body:
        if stmt.end_lineno >= before.lineno:
            break
        targets = (stmt.targets if isinstance(stmt, ast.Assign)
                   else [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else [])
        for t in targets:
            names = [t] if isinstance(t, ast.Name) else list(t.elts) if isinstance(t, ast.Tuple) else []
            try:
                value = _Evaluator(env)(stmt.value)
                values = [value] if isinstance(t, ast.Name) else list(value)
            except (_Unknown, TypeError) as e:
                values = [e if isinstance(e, _Unknown) else _Unknown(stmt, str(e))] * len(names)
            for n, v in zip(names, values):
                if isinstance(n, ast.Name):
                    once = counts.get(n.id, 0) == 1
                    env[n.id] = v if once else _Unknown(n, f"`{n.id}` is assigned more than once")
                    known.add(n.id)
    for name in counts:
        if name not in known:
            env[name] = _Unknown(scope, f"`{name}` is assigned in control flow (or after the launch)")
    return env


def _env_at(tree: ast.Module, fn: ast.FunctionDef | None, module_env: dict, call: ast.Call,
            bound: dict[str, Any] | None = None) -> dict[str, Any]:
    """What is known where `call` runs: in a function (its parameters bound by a caller or defaulted),
    or at module level (inside a top-level block such as `if __name__ == "__main__":`)."""
    if fn is not None:
        return _scope_env(fn.body, fn, _param_env(fn, module_env, bound), call)
    block = next((st for st in tree.body if st.lineno <= call.lineno <= st.end_lineno), None)
    if isinstance(block, (ast.If, ast.With)):
        return _scope_env(block.body, block, module_env, call)
    return module_env


def _bindings(tree: ast.Module, fn: ast.FunctionDef, calls: dict, module_env: dict) -> list[dict[str, Any]]:
    """The parameter values of `fn` at each place of the file that calls it by name (one level up)."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    out = []
    for call, caller in calls.items():
        if not (isinstance(call.func, ast.Name) and call.func.id == fn.name) or caller is fn:
            continue
        env = _env_at(tree, caller, module_env, call)
        ev = _Evaluator(env)
        bound: dict[str, Any] = {}
        pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        for name, node in pairs:
            try:
                bound[name] = ev(node)
            except _Unknown as e:
                bound[name] = e
        out.append(bound)
    return out


def _kernel_params(tree: ast.Module) -> dict[str, list[tuple[str, bool]]]:
    """kernel name -> [(parameter, is ct.Constant)] of every @ct.kernel function."""
    aliases = {t.id for node in tree.body if isinstance(node, ast.Assign) and "Constant" in ast.unparse(node.value)
               for t in node.targets if isinstance(t, ast.Name)}  # ConstInt = ct.Constant[int]

    def is_const(annotation: ast.expr | None) -> bool:
        return annotation is not None and ("Constant" in ast.unparse(annotation) or ast.unparse(annotation) in aliases)
    return {node.name: [(a.arg, is_const(a.annotation)) for a in node.args.args] for node in tree.body
            if isinstance(node, ast.FunctionDef) and any("kernel" in ast.unparse(d) for d in node.decorator_list)}


def infer_launches(path: str | Path, source: str | None = None) -> Inference:
    """Launch records derived from the `ct.launch(...)` call sites of the file's own host code."""
    path = Path(path)
    text = path.read_text() if source is None else source
    result = Inference()
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError:
        return result  # stage A reports the syntax error with its location
    kernels = _kernel_params(tree)
    module_env = _module_env(tree)
    calls = _enclosing_functions(tree)
    for call, fn in calls.items():
        if not _is_launch(call):
            continue
        result.sites += 1
        envs = [_env_at(tree, fn, module_env, call)]
        if fn is not None:  # the values its callers in this file pass
            envs += [_env_at(tree, fn, module_env, call, bound) for bound in _bindings(tree, fn, calls, module_env)]
        found, first_missing = [], None
        for env in envs:
            rec, missing = _infer_site(path, call, kernels, env)
            if rec is not None:
                found.append(rec)
            elif first_missing is None:
                first_missing = missing
        result.records += found
        if not found:
            result.missing += first_missing or []
    result.records = merge(result.records)
    return result


def _infer_site(path, call, kernels, env) -> tuple[LaunchRecord | None, list[Missing]]:
    kname = ast.unparse(call.args[2]).split(".")[-1] if len(call.args) > 2 else ""

    def miss(node, what, hint=""):
        return Missing(what, str(path), getattr(node, "lineno", call.lineno), getattr(node, "col_offset", 0) + 1, hint,
                       kname)
    if len(call.args) != 4:
        return None, [miss(call, "ct.launch takes (stream, grid, kernel, args)")]
    _, grid_node, kernel_node, args_node = call.args
    if kname not in kernels:
        return None, [miss(kernel_node, f"`{ast.unparse(kernel_node)}` is not a @ct.kernel of this file")]
    params = kernels[kname]
    ev = _Evaluator(env)
    missing: list[Missing] = []
    grid = None
    try:
        g = ev(grid_node)
        grid = grid3(g if isinstance(g, tuple) else (g,))
    except _Unknown as e:
        missing.append(miss(e.node, f"grid: {e.what}", "give the launch in a spec (tileport record)"))
    except (LaunchSpecError, TypeError) as e:
        missing.append(miss(grid_node, f"grid: {e}"))
    if not isinstance(args_node, (ast.Tuple, ast.List)):
        return None, missing + [miss(args_node, "the kernel arguments are not a literal tuple")]
    if len(args_node.elts) != len(params):
        return None, missing + [miss(args_node, f"{len(args_node.elts)} arguments for {len(params)} parameters "
                                                 f"of `{kname}`")]
    args = []
    for (pname, is_const), node in zip(params, args_node.elts):
        try:
            v = ev(node)
        except _Unknown as e:
            missing.append(miss(e.node, f"argument `{pname}` of `{kname}`: {e.what}",
                                "use a literal or a default, or record the launch (tileport record)"))
            continue
        args.append(_arg(pname, is_const, v))
    if missing:
        return None, missing
    return LaunchRecord("cutile", kname, str(Path(path).resolve()), grid, args, kname, "inferred",
                        f"{path}:{call.lineno}:{call.col_offset + 1}"), []


def _arg(name: str, is_const: bool, v: Any) -> LaunchArg:
    if isinstance(v, _Array):
        return LaunchArg(name, "array", v.dtype, list(v.shape), v.strides)
    if is_const:
        return LaunchArg(name, "const", value=v)
    if isinstance(v, bool):
        return LaunchArg(name, "scalar", "bool", value=v)
    if isinstance(v, int):
        return LaunchArg(name, "scalar", "int32", value=v)
    if isinstance(v, float):
        return LaunchArg(name, "scalar", "float32", value=v)
    return LaunchArg(name, "other", type=type(v).__name__)


__all__ = ["Inference", "Missing", "infer_launches"]
