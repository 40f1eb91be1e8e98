"""Per-op bytecode layouts, derived at run time from the installed cuTile Python writer.

`cuda/tile/_bytecode/encodings.py` is generated code with one `encode_<Name>Op` function per op,
built from about twenty primitive calls (`encode_typeid`, `encode_operand`, `encode_opattr_enum`,
flag bitmasks, `if code_builder.version >= ...` guards). We parse its *source* with `ast` and turn
each function into a list of read steps; the module is never imported or copied. New ops and
versions in a newer cuda-tile therefore reach the reader without code changes here.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


class SchemaError(RuntimeError):
    """encodings.py uses a construct this schema extractor does not understand."""


@dataclass(frozen=True, slots=True)
class FlagBit:
    param: str
    bit: int
    presence: bool  # True: `x is not None` (optional attr/operand); False: `bool(x)` (a bool attr)


@dataclass(frozen=True, slots=True)
class Step:
    """One read step. `kind` is one of:

    result   one result type id (`name` = result name)
    results  a sized list of result type ids
    flags    a varint bitmask (`bits`)
    attr     an attribute; `form` says how it is encoded, `enum` names the enum class
    count    a varint operand count for the operand steps that follow
    operand  an operand; `form` is one, optional, sized or unsized
    regions  the op has nested regions (a varint count follows its operands)
    """
    kind: str
    name: str = ""
    form: str = ""
    enum: str | None = None
    cond: str | None = None      # read only if this param is present (flag bit / operand count)
    since: int | None = None     # read only from this bytecode version on (e.g. 130400)
    bits: tuple[FlagBit, ...] = ()
    # The value an attribute has when the version predates it: the writer's else-branch asserts
    # it (`assert rounding_mode == RoundingMode.FULL`), or ALL_FALSE for a bool array it refuses
    # to set (`if any(inbounds): raise`).
    default: str | None = None


ALL_FALSE = "@all-false"  # one False per index operand


@dataclass(frozen=True, slots=True)
class OpSchema:
    name: str      # the op mnemonic as tileirdisasm prints it, e.g. "load_view_tko"
    opcode: int
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Schemas:
    by_opcode: dict[int, OpSchema]
    enums: dict[str, dict[int, str]]  # enum class -> byte value -> lower-case member name
    source: Path


_ATTR_FORMS = {
    "encode_opattr_enum": "enum", "encode_opattr_int": "int", "encode_opattr_bool": "bool",
    "encode_opattr_str": "str", "encode_opattr_typeid": "typeid", "encode_opattr_array": "array",
    "encode_opattr_tagged": "tagged", "encode_opattr_dense_typed_elements": "dense",
    "encode_opattr_dense_int32_array": "i32s", "encode_opattr_dense_bool_array": "bools",
    "encode_opattr_optimization_hints": "hints",
}
_OPERAND_FORMS = {
    "encode_operand": "one", "encode_optional_operand": "optional",
    "encode_sized_variadic_operands": "sized", "encode_unsized_variadic_operands": "unsized",
}
# Mnemonics that the CamelCase rule below cannot produce (acronyms inside the op name).
_MNEMONIC_EXCEPTIONS = {"AtomicCASTko": "atomic_cas_tko", "AtomicRMWTko": "atomic_rmw_tko",
                        "PreviewCall": "preview$call"}


def mnemonic(camel: str) -> str:
    """`LoadViewTko` -> `load_view_tko`, `AddF` -> `addf`, `FToF` -> `ftof`, `MmaFScaled` -> `mmaf_scaled`.

    A single capital letter is glued to the word before it (type suffixes like F/I); a longer token
    starts a new word unless the word so far is made of single letters only (`FPowF`, `XOrI`).
    """
    if camel in _MNEMONIC_EXCEPTIONS:
        return _MNEMONIC_EXCEPTIONS[camel]
    words: list[str] = []
    singles_only = False
    for tok in re.findall(r"[A-Z][a-z0-9]*", camel):
        if words and (len(tok) == 1 or singles_only):
            words[-1] += tok.lower()
            singles_only = singles_only and len(tok) == 1
        else:
            words.append(tok.lower())
            singles_only = len(tok) == 1
    return "_".join(words)


def _param(name: str) -> str:
    return name[:-1] if name.endswith("_") else name


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id
        if isinstance(f, ast.Attribute):
            return f.attr
    return ""


def _version(node: ast.AST) -> int:
    # `BytecodeVersion.V_13_4` -> 130400
    if isinstance(node, ast.Attribute) and node.attr.startswith("V_"):
        major, minor = node.attr[2:].split("_")
        return int(major) * 10000 + int(minor) * 100
    raise SchemaError(f"unexpected version expression {ast.unparse(node)}")


def _flag_bits(expr: ast.AST, env: dict[str, ast.AST], shift: int = 0) -> list[FlagBit]:
    if isinstance(expr, ast.Name) and expr.id in env:
        return _flag_bits(env[expr.id], env, shift)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        return _flag_bits(expr.left, env, shift) + _flag_bits(expr.right, env, shift)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.LShift) \
            and isinstance(expr.right, ast.Constant):
        return _flag_bits(expr.left, env, shift + expr.right.value)
    if _call_name(expr) == "bool" and isinstance(expr.args[0], ast.Name):
        return [FlagBit(_param(expr.args[0].id), shift, False)]
    if isinstance(expr, ast.Compare) and isinstance(expr.ops[0], ast.IsNot) \
            and isinstance(expr.left, ast.Name):
        return [FlagBit(_param(expr.left.id), shift, True)]
    raise SchemaError(f"unexpected flags expression {ast.unparse(expr)}")


def _implied(orelse: list[ast.stmt]) -> dict[str, str]:
    """Attribute values a version guard's else-branch insists on."""
    out: dict[str, str] = {}
    for st in orelse:
        if isinstance(st, ast.Assert) and isinstance(st.test, ast.Compare) \
                and isinstance(st.test.left, ast.Name) and isinstance(st.test.ops[0], ast.Eq) \
                and isinstance(st.test.comparators[0], ast.Attribute):
            out[_param(st.test.left.id)] = st.test.comparators[0].attr.rstrip("_").lower()
        elif isinstance(st, ast.If) and _call_name(st.test) == "any" \
                and isinstance(st.test.args[0], ast.Name):
            out[_param(st.test.args[0].id)] = ALL_FALSE
    return out


def _is_count(expr: ast.AST) -> bool:
    return any(_call_name(n) in ("len", "int") for n in ast.walk(expr))


class _Extractor:
    def __init__(self, fn: ast.FunctionDef):
        self.fn = fn
        self.opcode: int | None = None
        self.env: dict[str, ast.AST] = {}
        self.steps: list[Step] = []

    def run(self) -> OpSchema:
        self._stmts(self.fn.body, None, None)
        if self.opcode is None:
            raise SchemaError(f"{self.fn.name}: no opcode")
        camel = self.fn.name[len("encode_"):-len("Op")]
        return OpSchema(mnemonic(camel), self.opcode, tuple(self.steps))

    def _stmts(self, stmts: list[ast.stmt], since: int | None, cond: str | None,
                defaults: dict[str, str] | None = None) -> None:
        for st in stmts:
            if isinstance(st, ast.Assign):
                target = st.targets[0]
                if isinstance(target, ast.Name):
                    self.env[target.id] = st.value
            elif isinstance(st, ast.If):
                self._if(st, since, cond)
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                self._call(st.value, since, cond, defaults or {})
            elif isinstance(st, ast.Return):
                if _call_name(st.value) == "new_op_with_nested_blocks":
                    self.steps.append(Step("regions", since=since, cond=cond))
            elif not isinstance(st, (ast.Assert, ast.Raise, ast.Pass)):
                raise SchemaError(f"{self.fn.name}: unexpected statement {ast.unparse(st)}")

    def _if(self, st: ast.If, since: int | None, cond: str | None) -> None:
        test = st.test
        if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.GtE) \
                and ast.unparse(test.left) == "code_builder.version":
            # The else branches of version guards only assert/raise (older versions cannot
            # encode the feature); what they assert is the value older versions imply.
            if any(isinstance(n, ast.Call) and _call_name(n).startswith("encode_")
                   for s in st.orelse for n in ast.walk(s)):
                raise SchemaError(f"{self.fn.name}: encoding in a version else-branch")
            self._stmts(st.body, _version(test.comparators[0]), cond, _implied(st.orelse))
        elif isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.IsNot) \
                and isinstance(test.left, ast.Name):
            self._stmts(st.body, since, _param(test.left.id))
        else:
            raise SchemaError(f"{self.fn.name}: unexpected condition {ast.unparse(test)}")

    def _call(self, call: ast.Call, since: int | None, cond: str | None,
              defaults: dict[str, str]) -> None:
        name = _call_name(call)
        args = call.args
        if name == "encode_varint":
            expr = args[0]
            if self.opcode is None and isinstance(expr, ast.Constant):
                self.opcode = expr.value
            elif _is_count(expr):
                self.steps.append(Step("count", since=since, cond=cond))
            else:
                self.steps.append(Step("flags", since=since, cond=cond,
                                       bits=tuple(_flag_bits(expr, self.env))))
        elif name == "encode_typeid":
            self.steps.append(Step("result", _param(args[0].id), since=since, cond=cond))
        elif name == "encode_sized_typeid_seq":
            self.steps.append(Step("results", since=since, cond=cond))
        elif name in _OPERAND_FORMS:
            self.steps.append(Step("operand", _param(args[0].id), _OPERAND_FORMS[name],
                                   since=since, cond=cond))
        elif name in _ATTR_FORMS:
            form = _ATTR_FORMS[name]
            value = args[-1]
            enum = args[0].id if form == "enum" else None
            self.steps.append(Step("attr", _param(value.id), form, enum, cond=cond, since=since,
                                   default=defaults.get(_param(value.id))))
        elif name != "append":  # result_types.append(...) in PrintTkoOp: types are read as a list
            raise SchemaError(f"{self.fn.name}: unexpected call {ast.unparse(call)}")


def _enums(tree: ast.Module) -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "enum.Enum" for b in node.bases):
            members: dict[int, str] = {}
            for st in node.body:
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) \
                        and isinstance(st.value.value, bytes) and len(st.value.value) == 1:
                    members[st.value.value[0]] = st.targets[0].id.rstrip("_").lower()
            out[node.name] = members
    return out


def encodings_source() -> Path:
    """cuda/tile/_bytecode/encodings.py of the installed cuda-tile, found without importing
    cuda.tile (which would load its C extension)."""
    spec = importlib.util.find_spec("cuda")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(root) / "tile" / "_bytecode" / "encodings.py"
        if path.is_file():
            return path
    raise SchemaError("cuda-tile is not installed: the bytecode reader needs "
                      "cuda/tile/_bytecode/encodings.py (pip install cuda-tile==1.7.0)")


@lru_cache(maxsize=1)
def load_schemas() -> Schemas:
    path = encodings_source()
    tree = ast.parse(path.read_text(), str(path))
    by_opcode: dict[int, OpSchema] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("encode_") \
                and node.name.endswith("Op"):
            schema = _Extractor(node).run()
            by_opcode[schema.opcode] = schema
    return Schemas(by_opcode, _enums(tree), path)
