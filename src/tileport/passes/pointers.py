"""Lower `gather`/`scatter` to pointer-path operations, exactly as cuTile Python expands them.

For each index dimension: widen to u64, broadcast to the common shape, optionally compare with
the array extent (bounds mask), multiply by the stride (the last dimension's stride is the constant
1 of the capture signature), and sum; offset the broadcast base pointer; combine the bounds mask
with the user's mask; pass the padding as a tile. Running this before loop-invariant hoisting lets
the address arithmetic that does not depend on the loop move out of it, as cuTile does.
"""

from __future__ import annotations

from tileport.model.ir import Atom, Do, Kernel, Let, Lit, Op, Ref
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.model.types import PtrT, ScalarT, TileT, TokenT, concrete_dtypes, is_float
from tileport.passes.uses import expand_statements, taken_names

U64 = "u64"
# an atomic on an array -> the pointer-tile operation it becomes
ATOMIC_ON_POINTERS = {OpKind.ATOMIC_RMW: OpKind.ATOMIC_RMW_PTR, OpKind.ATOMIC_CAS: OpKind.ATOMIC_CAS_PTR}


# Bytes per element of the dtypes whose single-element accesses get an alignment assumption.
ELEMENT_BYTES = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2}


class _Emitter:
    def __init__(self, kernel: Kernel, naming: Naming, taken: set[str]):
        self.kernel = kernel
        self.naming = naming
        self.taken = taken
        self.out: list = []

    def fresh(self, base: str) -> str:
        return self.naming.fresh(base, self.taken)

    def let(self, hint: str, kind: OpKind, args: tuple, ty, loc, **attrs) -> Ref:
        name = self.fresh(hint)
        self.out.append(Let(name, Op(kind, args, ty, loc, tuple(sorted(attrs.items())))))
        return Ref(name, ty)

    def broadcast_to(self, x: Ref, shape: tuple, loc) -> Ref:
        """reshape to the rank (leading 1s), then broadcast, skipping no-op steps."""
        src = x.ty.shape
        make = (lambda s: PtrT(x.ty.dtype, s)) if isinstance(x.ty, PtrT) else (lambda s: TileT(x.ty.dtype, s))
        if tuple(src) == tuple(shape):
            return x
        if len(src) < len(shape):
            padded = (1,) * (len(shape) - len(src)) + tuple(src)
            x = self.let(f"{x.name}_r", OpKind.RESHAPE, (x,), make(padded), loc, shape=padded)
            src = padded
        if tuple(src) != tuple(shape):
            x = self.let(f"{x.name}_b", OpKind.BROADCAST, (x,), make(tuple(shape)), loc, shape=tuple(shape))
        return x

    def widen(self, atom: Atom, name: str, loc) -> Ref:
        """An index (tile or scalar) as u64 in its own shape."""
        if isinstance(atom, Ref) and isinstance(atom.ty, TileT):
            src = atom
        else:
            src = self.let(f"{name}_0d", OpKind.TILE0, (atom,), TileT("i32", ()), loc)
        return self.let(f"{name}_u64", OpKind.ASTYPE, (src,), TileT(U64, src.ty.shape), loc, dtype=U64, rounding=None)

    def scalar_u64(self, atom: Atom, shape: tuple, name: str, loc) -> Ref:
        return self.broadcast_to(self.widen(atom, name, loc), shape, loc)

    def pointers(self, arr: Ref, indices, shape: tuple, check_bounds: bool, base: str, loc, elem=None):
        rank = arr.ty.rank
        offset, mask = None, None
        for d, idx in enumerate(indices):
            wide = self.broadcast_to(self.widen(idx, f"{base}_i{d}", loc), shape, loc)
            if check_bounds:
                extent = self.let(f"{base}_n{d}", OpKind.ARRAY_DIM, (arr,), ScalarT("i32"), loc, axis=d)
                extent = self.scalar_u64(extent, shape, f"{base}_n{d}", loc)
                inb = self.let(f"{base}_in{d}", OpKind.COMPARE, (wide, extent), TileT("bool", shape), loc, op="<")
                mask = inb if mask is None else self.let(f"{base}_in", OpKind.BINARY, (mask, inb), TileT("bool", shape),
                                                         loc, op="and", rounding=None, ftz=None, nan=None)
            if d == rank - 1:
                stride = self.let(f"{base}_one", OpKind.FULL, (Lit(1, ScalarT(U64)),), TileT(U64, shape), loc,
                                  dtype=U64, shape=shape)
            else:
                s = self.let(f"{base}_s{d}", OpKind.ARRAY_STRIDE, (arr,), ScalarT("i32"), loc, axis=d)
                stride = self.scalar_u64(s, shape, f"{base}_s{d}", loc)
            term = self.let(f"{base}_off{d}", OpKind.BINARY, (wide, stride), TileT(U64, shape), loc, op="mul",
                            rounding=None, ftz=None, nan=None)
            offset = term if offset is None else self.let(f"{base}_off", OpKind.BINARY, (offset, term),
                                                          TileT(U64, shape), loc, op="add", rounding=None,
                                                          ftz=None, nan=None)
        ptr = self.let(f"{base}_base", OpKind.PTR_BASE, (arr,), PtrT(arr.ty.dtype, ()), loc)
        dtype = arr.ty.dtype if elem is None else elem
        if elem is not None:  # a re-cast pointer: the base's address as a pointer to `elem`
            ptr = self.let(f"{base}_cast", OpKind.PTR_CAST, (ptr,), PtrT(elem, ()), loc)
        ptr = self.broadcast_to(ptr, shape, loc)
        ptrs = self.let(f"{base}_ptrs", OpKind.PTR_OFFSET, (ptr, offset), PtrT(dtype, shape), loc)
        if not shape and dtype in ELEMENT_BYTES:
            # a single-element access: cuTile Python states the element alignment of its pointer
            ptrs = self.let(f"{base}_aligned", OpKind.ASSUME_DIV_BY, (ptrs,), ptrs.ty, loc, divisor=ELEMENT_BYTES[dtype])
        return ptrs, mask

    def with_user_mask(self, bounds, user, shape, base, loc):
        if bounds is not None and user is not None:
            return self.let(f"{base}_mask", OpKind.BINARY, (bounds, user), TileT("bool", shape), loc, op="and",
                            rounding=None, ftz=None, nan=None)
        return bounds if bounds is not None else user

    def pad(self, value, dtype, shape, base, loc) -> Ref:
        if all(is_float(v) for v in concrete_dtypes(dtype, self.kernel.dtype_vars)):
            return self.let(f"{base}_pad", OpKind.SPLAT, (Lit(float(value), ScalarT(dtype)),), TileT(dtype, shape), loc,
                            shape=shape)
        return self.let(f"{base}_pad", OpKind.FULL, (Lit(int(value), ScalarT(dtype)),), TileT(dtype, shape), loc,
                        dtype=dtype, shape=shape)


def lower_pointers(kernel: Kernel, naming: Naming) -> int:
    """Rewrite every gather/scatter of the kernel in place; returns how many were lowered."""
    taken = taken_names(kernel)

    def expand(st):
        if not (isinstance(st, (Let, Do))
                and st.op.kind in (OpKind.GATHER, OpKind.SCATTER, OpKind.ATOMIC_RMW, OpKind.ATOMIC_CAS)):
            return None
        em = _Emitter(kernel, naming, taken)
        _lower(em, st, st.op)
        return em.out

    return expand_statements(kernel.body, expand)


def _lower(em: _Emitter, st, op: Op) -> None:
    loc = op.loc
    check = op.attr("check_bounds") is not False
    if op.kind in (OpKind.ATOMIC_RMW, OpKind.ATOMIC_CAS):
        _lower_atomic(em, st, op, check)
    elif op.kind == OpKind.GATHER:
        arr, *rest = op.args
        rank = arr.ty.rank
        indices, user = rest[:rank], (rest[rank] if op.attr("has_mask") else None)
        shape = op.ty.shape
        base = st.name
        ptrs, bounds = em.pointers(arr, indices, shape, check, base, loc, op.attr("elem"))
        mask = em.with_user_mask(bounds, user, shape, base, loc)
        pad = em.pad(op.attr("padding_value"), op.ty.dtype, shape, base, loc)
        args = (ptrs, pad) + ((mask,) if mask is not None else ())
        em.out.append(Let(st.name, Op(OpKind.LOAD_PTR, args, op.ty, loc,
                                      (("array", arr.name), ("has_mask", mask is not None),
                                       ("latency", op.attr("latency"))))))
    else:
        arr, value, *rest = op.args
        rank = arr.ty.rank
        indices, user = rest[:rank], (rest[rank] if op.attr("has_mask") else None)
        shape = value.ty.shape
        base = em.fresh(f"{arr.name}_scatter")
        ptrs, bounds = em.pointers(arr, indices, shape, check, base, loc, op.attr("elem"))
        mask = em.with_user_mask(bounds, user, shape, base, loc)
        args = (ptrs, value) + ((mask,) if mask is not None else ())
        em.out.append(Do(Op(OpKind.STORE_PTR, args, TokenT(), loc,
                            (("array", arr.name), ("has_mask", mask is not None), ("latency", op.attr("latency"))))))



def _lower_atomic(em: _Emitter, st: Let, op: Op, check: bool) -> None:
    """cuTile Python's atomics: the gather/scatter pointers and bounds mask, then the pointer-tile operation."""
    n_values = 2 if op.kind == OpKind.ATOMIC_CAS else 1
    arr, values, rest = op.args[0], op.args[1:1 + n_values], op.args[1 + n_values:]
    indices, user = rest[:arr.ty.rank], (rest[arr.ty.rank] if op.attr("has_mask") else None)
    ptrs, bounds = em.pointers(arr, indices, op.ty.shape, check, st.name, op.loc)
    mask = em.with_user_mask(bounds, user, op.ty.shape, st.name, op.loc)
    attrs = {"array": arr.name, "has_mask": mask is not None, "memory_order": op.attr("memory_order"),
             "memory_scope": op.attr("memory_scope")}
    if op.kind == OpKind.ATOMIC_RMW:
        attrs["mode"] = op.attr("mode")
    args = (ptrs, *values) + ((mask,) if mask is not None else ())
    em.out.append(Let(st.name, Op(ATOMIC_ON_POINTERS[op.kind], args, op.ty, op.loc, tuple(sorted(attrs.items())))))
