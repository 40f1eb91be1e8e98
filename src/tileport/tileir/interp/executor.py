"""Run an entry function of a Tile IR module over a grid, block after block.

Arguments follow the calling convention both sides use: an array parameter is its base pointer,
then its shape, then its strides (in elements), each a scalar parameter; a runtime scalar is one
parameter. The port's entry may take extra leading arguments (strides the launcher passes again),
described by `extra_args` roles as `tileport.capture.generated_arg_roles` gives them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..model import Block, Function, Module, Op, Value
from ..ops import TERMINATORS
from ..types import PointerType, ScalarType, TileType, TokenType
from .errors import ArgumentError, InterpError, UnsupportedOp
from .optable import OPS
from .values import TOKEN, Memory, storage


@dataclass
class Jump:
    """How a block ended: its terminator's name and operand values."""
    kind: str            # yield | continue | break | return | end (the block had no terminator)
    values: list


@dataclass
class Array:
    """An array argument: `data` in any NumPy dtype, held in memory as element type `elem`
    ("bf16" arrays are given as float32 and rounded)."""
    data: np.ndarray
    elem: str


@dataclass
class Scalar:
    value: Any
    elem: str


Argument = Array | Scalar


# Ops executed per run, all blocks together (the corpus needs at most a few thousand): a port whose
# loop runs away stops here with an error instead of hanging.
MAX_OPS = 1_000_000


class Executor:
    def __init__(self, function: Function, memory: Memory, grid: tuple[int, int, int],
                 max_ops: int = MAX_OPS):
        self.function = function
        self.memory = memory
        self.grid = grid
        self.block_id = (0, 0, 0)
        self.ops_left = max_ops
        self.env: dict[Value, Any] = {}
        self._index = {op: i for i, op in enumerate(_walk_ops(function.body))}

    def where(self, op: Op) -> str:
        return op.loc or f"@{self.function.name} op #{self._index.get(op, '?')}"

    def run_block(self, block: Block, params: Sequence[Any]) -> Jump:
        env = self.env
        _assign(env, block.args, params, block.parent, self)
        for op in block.ops:
            self.ops_left -= 1
            if self.ops_left < 0:
                raise InterpError("the op budget of the run is spent (a runaway loop?)", op,
                                  self.where(op))
            if op.name in TERMINATORS:
                return Jump(op.name, [env[v] for v in op.operands])
            impl = OPS.get(op.name)
            if impl is None:
                raise UnsupportedOp(f"op `{op.name}` is not supported by the interpreter", op,
                                    self.where(op))
            try:
                results = impl(self, op, [env[v] for v in op.operands])
            except InterpError as e:
                if e.op_name is None:  # raised below an op: locate it
                    raise type(e)(e.detail, op, self.where(op)) from e
                raise
            except (ValueError, TypeError, IndexError, KeyError) as e:
                raise InterpError(f"{type(e).__name__}: {e}", op, self.where(op)) from e
            if isinstance(results, Jump):
                return results  # a continue/break/return inside an if
            _assign(env, op.results, results, op, self)
        return Jump("end", [])

    def run(self, params: list[Any]) -> None:
        gx, gy, gz = self.grid
        for z, y, x in itertools.product(range(gz), range(gy), range(gx)):
            self.block_id = (x, y, z)
            self.env = {}
            self.run_block(self.function.body, params)


def _assign(env: dict, targets: list[Value], values: Sequence[Any], op: Op | None,
            executor: Executor) -> None:
    """Bind values to results or block arguments. A module canonicalized without tokens
    (`canonicalize(..., ignore_tokens=True)`) has no token results or arguments: tokens are
    then left out of `values`."""
    if len(values) != len(targets):
        values = [v for v in values if v is not TOKEN]
    if len(values) != len(targets):
        name = op.name if op is not None else "function body"
        raise InterpError(f"{len(values)} values for {len(targets)} results or block arguments of "
                          f"`{name}`", op, executor.where(op) if op is not None else None)
    for target, value in zip(targets, values):
        env[target] = value


def _walk_ops(block: Block):
    for op in block.ops:
        yield op
        for region in op.regions:
            for b in region.blocks:
                yield from _walk_ops(b)


def entry_function(module: Module) -> Function:
    entries = module.entries
    if len(entries) != 1:
        raise ArgumentError(f"the module has {len(entries)} entry functions; expected one")
    return entries[0]


def _scalar(value: Any, elem: ScalarType) -> np.ndarray:
    return np.asarray(value).astype(storage(elem))


def bind(function: Function, memory: Memory, args: Sequence[tuple[str, Argument]],
         extra_args: dict[int, tuple] | None = None) -> list[Any]:
    """The entry's parameter values: the port's extra leading arguments; then arrays placed in `memory`,
    flattened to pointer, shape and strides; runtime scalars as 0-d tiles."""
    values: list[Any] = []
    arrays: list[tuple[int, np.ndarray]] = []
    partitioned = {role[1] for role in (extra_args or {}).values() if role[0] == "partition_shape"}
    partition_shapes: list[int] = []  # where the partition shapes of arrays passed as `&mut Tensor` stand
    for name, arg in args:
        if isinstance(arg, Array):
            data = np.ascontiguousarray(arg.data)
            buf = memory.add(name, ScalarType(arg.elem), data)
            strides = [s // data.itemsize for s in data.strides] if data.ndim else []
            values.append(np.asarray(buf.base, np.int64))
            values.extend(np.asarray(n) for n in data.shape)
            values.extend(np.asarray(s) for s in strides)
            if len(arrays) in partitioned:  # cutile passes the partition's shape, then its strides (the tensor's)
                partition_shapes.extend(range(len(values), len(values) + data.ndim))
                values.extend(np.asarray(n) for n in data.shape)
                values.extend(np.asarray(s) for s in strides)
            arrays.append((data.shape, strides))
        else:
            values.append(np.asarray(arg.value))
    params = function.body.args
    leading = _leading_args(len(params) - len(values), extra_args or {}, arrays)
    values[:0] = leading
    if len(params) != len(values):
        raise ArgumentError(f"@{function.name} takes {len(params)} parameters; the arguments give "
                            f"{len(values)} (arrays count 1 + 2 x rank)", where=function.loc)
    if partition_shapes:
        _check_unread(function, [params[len(leading) + i] for i in partition_shapes])
    out = []
    for p, v in zip(params, values):
        t = p.type
        if isinstance(t, TileType) and isinstance(t.elem, PointerType):
            out.append(np.asarray(v, np.int64))
        elif isinstance(t, TileType) and isinstance(t.elem, ScalarType):
            out.append(_scalar(v, t.elem))
        elif isinstance(t, TokenType):
            out.append(TOKEN)
        else:
            raise ArgumentError(f"parameter of type {t} is not supported", where=function.loc)
    return out


def _check_unread(function: Function, params: list[Value]) -> None:
    """A partition's shape is its tile shape, which the arguments do not give: the interpreter binds the
    tensor's shape there, so the entry must not read it (its partition views carry the tile shape)."""
    wanted = set(params)
    for op in _walk_ops(function.body):
        if wanted.intersection(op.operands):
            raise ArgumentError(f"@{function.name} reads a partition's shape parameter, which the interpreter "
                                f"does not know", where=function.loc)


def _leading_args(count: int, roles: dict[int, tuple], arrays: list[tuple]) -> list[np.ndarray]:
    """The values of the port's `count` launcher-filled leading parameters (strides), from their roles at
    positions 0..count-1; the other roles describe the cuTile layout, which the flattening follows."""
    out = []
    for i in range(max(count, 0)):
        role = roles.get(i)
        if role is None:
            break  # the count check reports the mismatch
        if role[0] != "stride":
            raise ArgumentError(f"unknown extra argument role {role}")
        out.append(np.asarray(arrays[role[1]][1][role[2]]))
    return out


def run_kernel(module: Module, args: Sequence[tuple[str, Argument]], grid: Sequence[int],
               extra_args: dict[int, tuple] | None = None,
               max_ops: int = MAX_OPS) -> dict[str, np.ndarray]:
    """Run the module's entry over `grid` (blocks in order, x fastest) on copies of the arrays.

    Returns every array argument after the run, by name, in its original shape, as stored
    (bf16 as float32 values)."""
    function = entry_function(module)
    memory = Memory()
    params = bind(function, memory, args, extra_args)
    grid3 = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    Executor(function, memory, grid3, max_ops).run(params)
    return {name: memory.buffer(name).data.reshape(np.shape(arg.data))
            for name, arg in args if isinstance(arg, Array)}
