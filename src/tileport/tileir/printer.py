"""A canonical, stable MLIR-like rendering of a module (for reports and golden files).

Unlike tileirdisasm output it shows every attribute (including defaults the printer hides, e.g. the
rounding mode of `exp`) and every terminator, sorts attributes by name, and labels operands by role
where an op has optional or variadic operands. Values print by `Value.name` when canonicalization
set one, else by a running number.
"""

from __future__ import annotations

from .attrs import Dense, render, render_constant
from .model import Block, Function, Module, Op, Value

# Operand roles that read well without a label.
_PLAIN_ROLES = frozenset({"lhs", "rhs", "source", "from", "acc", "x", "y", "operands", "tokens", "args",
                          "condition", "cond", "val_if_true", "val_if_false", "value", "ptr",
                          "offset", "exponent", "tensor_view", "src", "base"})


class _Names:
    def __init__(self) -> None:
        self.names: dict[Value, str] = {}

    def __call__(self, v: Value) -> str:
        n = self.names.get(v)
        if n is None:
            n = v.name or f"%v{len(self.names)}"
            self.names[v] = n
        return n


def _operands(op: Op, name: _Names) -> str:
    if all(r in _PLAIN_ROLES for r in op.operand_roles):
        return ", ".join(name(v) for v in op.operands)
    groups: list[tuple[str, list[str]]] = []
    for role, v in zip(op.operand_roles, op.operands):
        if groups and groups[-1][0] == role:
            groups[-1][1].append(name(v))
        else:
            groups.append((role, [name(v)]))
    parts = []
    for role, vals in groups:
        parts.append(f"{role} {vals[0]}" if len(vals) == 1 else f"{role} [{', '.join(vals)}]")
    return ", ".join(parts)


def op_line(op: Op, name: _Names | None = None) -> str:
    """One line for an op (no regions): `%r = name operands {attrs} : result types`."""
    name = name or _Names()
    head = ", ".join(name(r) for r in op.results)
    text = f"{head} = {op.name}" if head else op.name
    if op.name == "constant" and isinstance(op.attributes.get("value"), Dense) and op.results:
        text += " " + render_constant(op.results[0].type, op.attributes["value"])
        attrs = {k: v for k, v in op.attributes.items() if k != "value"}
    else:
        attrs = op.attributes
    ops = _operands(op, name)
    if ops:
        text += " " + ops
    if attrs:
        text += " {" + ", ".join(f"{k} = {render(attrs[k])}" for k in sorted(attrs)) + "}"
    if op.results:
        text += " : " + ", ".join(str(r.type) for r in op.results)
    return text


def _block(block: Block, name: _Names, indent: str, out: list[str], show_args: bool) -> None:
    if show_args:
        args = ", ".join(f"{name(a)}: {a.type}" for a in block.args)
        out.append(f"{indent[:-2]}^bb({args}):")
    for op in block.ops:
        line = indent + op_line(op, name)
        if op.regions:
            out.append(line + " {")
            for ri, region in enumerate(op.regions):
                if ri:
                    out.append(indent + "} {")
                for b in region.blocks:
                    _block(b, name, indent + "  ", out, True)
            out.append(indent + "}")
        else:
            out.append(line)


def _function(f: Function, name: _Names, out: list[str]) -> None:
    kind = "entry" if f.is_entry else "func"
    args = ", ".join(f"{name(a)}: {a.type}" for a in f.args)
    hints = f" optimization_hints={f.hints}" if f.hints is not None else ""
    out.append(f"{kind} @{f.name}({args}){hints} {{")
    _block(f.body, name, "  ", out, False)
    out.append("}")


def to_text(module: Module) -> str:
    """The canonical text of a module."""
    out = [f"// Tile IR bytecode {module.version}"]
    for g in module.globals:
        out.append(f"global @{g.name} : {g.type} align {g.alignment}"
                   f"{' constant' if g.constant else ''} {g.visibility}")
    for f in module.functions:
        name = _Names()
        _function(f, name, out)
    return "\n".join(out) + "\n"
