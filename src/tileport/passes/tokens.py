"""Memory-token ordering, as cuTile Python's token-order pass assigns it.

Tile IR orders memory operations with tokens. cuTile Python threads, per array, a "last operation"
and a "last store" token: a load waits for the array's last store and joins into its last operation;
a store waits for the array's last operation and becomes both; loops carry the tokens of the arrays
their bodies touch (a store whose index is the loop variable, alone on its array in an innermost
loop, waits only for the tokens before the loop and is joined into the carried one); branches yield
them. cutile-rs orders nothing by itself, and the ordering changes what tileiras generates, so the
translator reproduces the same token graph. Token values nobody consumes are dropped, as cuTile's
dead-code elimination drops them. Arrays are assumed not to alias each other (as in the capture).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tileport.model.ir import Block, Break, Continue, Do, For, If, Kernel, Let, Op, Ref, Return, While, walk
from tileport.model.naming import Naming
from tileport.model.ops import OpKind
from tileport.model.types import TokenT
from tileport.passes.uses import taken_names

LOADS = (OpKind.LOAD, OpKind.LOAD_PTR)
STORES = (OpKind.STORE, OpKind.STORE_PTR)
ATOMICS = (OpKind.ATOMIC_RMW_PTR, OpKind.ATOMIC_CAS_PTR)  # stores to their array, ordered by their memory_order
LAST_OP, LAST_STORE = "op", "store"
# The last acquiring operation (an atomic with acquire semantics): every later memory operation waits for it.
ACQUIRE = ("", "acquire")


# ---------------------------------------------------------------- the token graph

class Node:
    """A token value."""


@dataclass(eq=False)
class Root(Node):
    array: str


@dataclass(eq=False)
class Result(Node):
    stmt: object  # the Let/Do of the memory operation


@dataclass(eq=False)
class Join(Node):
    parts: list


@dataclass(eq=False)
class Carry(Node):
    """A loop-carried token: `init` on entry, `updates` at the end of each iteration."""

    array: str
    role: str
    init: Node = None
    updates: list = field(default_factory=list)


@dataclass(eq=False)
class Phi(Node):
    """A token yielded by both branches of an `if`."""

    array: str
    role: str
    before: Node = None
    branches: list = field(default_factory=list)


@dataclass(eq=False)
class Marker:
    """A place in a statement list where a token statement may be materialized."""

    kind: str  # join | carry_init | carry_update | phi_init | phi_update
    node: Node
    value: Node = None  # for updates: the value assigned


def _array_of(op: Op) -> str:
    # pointer ops, and view loads/stores through an `Array.slice` view, name the array parameter they access
    return op.attr("array") or op.args[0].name


def _acquires(op: Op) -> bool:
    return op.kind in ATOMICS and op.attr("memory_order") in ("acquire", "acq_rel")


def _releases(op: Op) -> bool:
    return op.kind in ATOMICS and op.attr("memory_order") in ("release", "acq_rel")


def _acquirer(block: Block) -> Op | None:
    """The first operation of `block` (nested blocks included) with acquire semantics."""
    return next((st.op for st in walk(block) if isinstance(st, (Let, Do)) and _acquires(st.op)), None)


def _distinct(parts: list) -> list:
    """Tokens to join, first occurrence kept; cuTile has one entry token, so every Root is the same."""
    out: list = []
    for p in parts:
        if any(p is q or (isinstance(p, Root) and isinstance(q, Root)) for q in out):
            continue
        out.append(p)
    return out


def _token_keys(effects: dict[str, str]) -> list[tuple[str, str]]:
    """The (array, role) tokens that blocks with these effects advance: last op, and last store if stored."""
    keys = []
    for a, effect in effects.items():
        keys.append((a, LAST_OP))
        if effect == "store":
            keys.append((a, LAST_STORE))
    return keys


def _union(*effects: dict[str, str]) -> dict[str, str]:
    """Effects of several blocks: an array any of them stores to is stored (cuTile takes the maximum)."""
    out: dict[str, str] = {}
    for eff in effects:
        for a, effect in eff.items():
            out[a] = "store" if "store" in (effect, out.get(a)) else effect
    return out


def _effects(block: Block) -> dict[str, str]:
    """Arrays a block (with nested blocks) reads or writes: name -> 'load' | 'store'."""
    out: dict[str, str] = {}
    for st in walk(block):
        if isinstance(st, (Let, Do)) and st.op.kind in (*LOADS, *STORES, *ATOMICS):
            a = _array_of(st.op)
            if st.op.kind not in LOADS:
                out[a] = "store"
            else:
                out.setdefault(a, "load")
    return out


# ---------------------------------------------------------------- phase 1: assign tokens

class _Assign:
    def __init__(self):
        self.inputs: dict[int, Node] = {}  # id(stmt) -> input token node

    def block(self, block: Block, tmap: dict, loop: tuple | None) -> None:
        out = []
        for st in block.stmts:
            op = st.op if isinstance(st, (Let, Do)) else None
            if op is not None and op.kind in LOADS:
                a = _array_of(op)
                self.inputs[id(st)] = self.after_acquire(tmap.get((a, LAST_STORE), Root(a)), tmap, out)
                out.append(st)
                join = Join([tmap.get((a, LAST_OP), Root(a)), Result(st)])
                out.append(Marker("join", join))
                tmap[(a, LAST_OP)] = join
            elif op is not None and op.kind in STORES:
                a = _array_of(op)
                if loop is not None and id(st) in loop[1]:  # a parallel store of the innermost loop
                    self.inputs[id(st)] = self.after_acquire(loop[2].get((a, LAST_OP), Root(a)), tmap, out)
                    out.append(st)
                    join = Join([tmap.get((a, LAST_OP), Root(a)), Result(st)])
                    out.append(Marker("join", join))
                    tmap[(a, LAST_OP)] = tmap[(a, LAST_STORE)] = join
                else:
                    self.inputs[id(st)] = self.after_acquire(tmap.get((a, LAST_OP), Root(a)), tmap, out)
                    out.append(st)
                    tmap[(a, LAST_OP)] = tmap[(a, LAST_STORE)] = Result(st)
            elif op is not None and op.kind in ATOMICS:
                self.atomic(st, tmap, out)
            elif isinstance(st, (For, While)):
                out += self.loop(st, tmap)
            elif isinstance(st, If):
                out += self.branch(st, tmap, loop)
            elif isinstance(st, (Continue, Break)) and loop is not None:
                out += self.exit_updates(loop[0], tmap)
                out.append(st)
            else:
                out.append(st)
        block.stmts[:] = out

    def after_acquire(self, token: Node, tmap: dict, out: list) -> Node:
        """`token`, joined with the last acquiring operation's once there is one (cuTile's acquire key)."""
        parts = _distinct([token, tmap[ACQUIRE]]) if ACQUIRE in tmap else [token]
        if len(parts) == 1:
            return token
        join = Join(parts)
        out.append(Marker("join", join))
        return join

    def atomic(self, st, tmap: dict, out: list) -> None:
        """An atomic waits for its array's last operation and, when it releases, for the last operation on
        every array (and the last acquire); it becomes its array's last op and store, and the last acquire
        when it acquires."""
        a = _array_of(st.op)
        parts = [tmap.get((a, LAST_OP), Root(a))]
        if _releases(st.op):
            parts += [v for (_, role), v in tmap.items() if role == LAST_OP]
        parts += [tmap[ACQUIRE]] if ACQUIRE in tmap else []
        parts = _distinct(parts)
        if len(parts) == 1:
            self.inputs[id(st)] = parts[0]
        else:
            join = Join(parts)
            out.append(Marker("join", join))
            self.inputs[id(st)] = join
        out.append(st)
        tmap[(a, LAST_OP)] = tmap[(a, LAST_STORE)] = result = Result(st)
        if _acquires(st.op):
            tmap[ACQUIRE] = result

    def _acquire_key(self, blocks, tmap: dict) -> dict:
        """The acquire token a loop or branch carries when its blocks acquire (initially the entry token)."""
        op = next((o for blk in blocks if (o := _acquirer(blk)) is not None), None)
        return {} if op is None else {ACQUIRE: tmap.get(ACQUIRE, Root(_array_of(op)))}

    def loop(self, st: For | While, tmap: dict) -> list:
        carries = {}
        pre = []
        blocks = st.blocks if isinstance(st, While) else (st.body,)
        effects = _union(*(_effects(blk) for blk in blocks))
        inits = {key: tmap.get(key, Root(key[0])) for key in _token_keys(effects)} | self._acquire_key(blocks, tmap)
        for key, init in inits.items():
            c = Carry(key[0] or "acquire", key[1], init=init)
            carries[key] = c
            pre.append(Marker("carry_init", c))
        body_map = dict(tmap)
        body_map.update(carries)
        # cuTile parallelizes stores of `for` loops only (their index is the induction variable)
        parallel = _parallel_stores(st) if isinstance(st, For) else set()
        if isinstance(st, While):
            self.block(st.cond, body_map, (carries, parallel, dict(tmap)))
        self.block(st.body, body_map, (carries, parallel, dict(tmap)))
        st.body.stmts += self.exit_updates(carries, body_map)
        tmap.update(carries)
        return pre + [st]

    def exit_updates(self, carries: dict, tmap: dict) -> list:
        out = []
        for key, c in carries.items():
            value = tmap.get(key, c)
            if value is not c:
                c.updates.append(value)
                out.append(Marker("carry_update", c, value))
        return out

    def branch(self, st: If, tmap: dict, loop: tuple | None) -> list:
        keys = _token_keys(_union(_effects(st.then), _effects(st.orelse)))
        befores = {key: tmap.get(key, Root(key[0])) for key in keys} | self._acquire_key((st.then, st.orelse), tmap)
        phis = {key: Phi(key[0] or "acquire", key[1], before=before) for key, before in befores.items()}
        # A `break`/`continue` in a branch leaves the loop with the tokens of that point (cuTile's jump
        # operands); a branch that jumps yields nothing to the `if`.
        inner = (loop[0], set(), loop[2]) if loop is not None else None
        for blk in (st.then, st.orelse):
            m = dict(tmap)
            self.block(blk, m, inner)
            if blk.stmts and isinstance(blk.stmts[-1], (Break, Continue, Return)):
                continue
            for key, phi in phis.items():
                value = m.get(key, phi.before)
                phi.branches.append(value)
                if value is not phi.before:
                    blk.stmts.append(Marker("phi_update", phi, value))
        tmap.update(phis)
        return [Marker("phi_init", phi) for phi in phis.values()] + [st]


def _parallel_stores(loop: For) -> set[int]:
    """Stores cuTile lets run unordered across the iterations of `loop` (see module docstring)."""
    direct: dict[str, list] = {}
    for st in loop.body.stmts:
        if isinstance(st, (Let, Do)) and st.op.kind in (*LOADS, *STORES, *ATOMICS):
            direct.setdefault(_array_of(st.op), []).append(st)
    nested: dict[str, str] = {}
    for st in loop.body.stmts:
        if isinstance(st, For):
            nested = _union(nested, _effects(st.body))
        elif isinstance(st, While):
            nested = _union(nested, _effects(st.cond), _effects(st.body))
        elif isinstance(st, If):
            nested = _union(nested, _effects(st.then), _effects(st.orelse))
    out = set()
    for a, ops in direct.items():
        if len(ops) != 1 or ops[0].op.kind != OpKind.STORE or a in nested:
            continue
        index = ops[0].op.args[2:]
        if any(isinstance(i, Ref) and i.name == loop.index for i in index):
            out.add(id(ops[0]))
    return out


# ---------------------------------------------------------------- phase 2: what is needed

def _needed(inputs: dict[int, Node]) -> list[Node]:
    """Every token node some memory operation's input depends on."""
    seen, out, stack = set(), [], list(inputs.values())
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        if isinstance(n, Join):
            stack += n.parts
        elif isinstance(n, Carry):
            stack += [n.init] + n.updates
        elif isinstance(n, Phi):
            stack += [n.before] + n.branches
    return out


# ---------------------------------------------------------------- phase 3: materialize

class _Materialize:
    def __init__(self, kernel: Kernel, naming: Naming, inputs: dict[int, Node], need: set[int]):
        self.kernel = kernel
        self.naming = naming
        self.inputs = inputs
        self.need = need
        self.names: dict[int, str] = {}
        self.taken = taken_names(kernel)
        self.roots: dict[str, str] = {}

    def fresh(self, base: str) -> str:
        return self.naming.fresh(base, self.taken)

    def name(self, n: Node) -> str:
        if isinstance(n, Root):
            if n.array not in self.roots:
                self.roots[n.array] = self.fresh(f"{n.array}_token")
            return self.roots[n.array]
        if id(n) not in self.names:
            if isinstance(n, Result):
                base = f"{_array_of(n.stmt.op)}_tok"
            elif isinstance(n, Join):
                base = "joined_tok"
            else:
                base = f"{n.array}_last_{n.role}"
            self.names[id(n)] = self.fresh(base)
        return self.names[id(n)]

    def ref(self, n: Node) -> Ref:
        return Ref(self.name(n), TokenT())

    def block(self, block: Block) -> None:
        out = []
        for st in block.stmts:
            if isinstance(st, Marker):
                out += self.marker(st)
                continue
            if isinstance(st, (Let, Do)) and id(st) in self.inputs:
                out.append(self.memory_op(st))
                continue
            if isinstance(st, (For, While)):
                carries = [c for c in self._carries(st) if id(c) in self.need]
                if isinstance(st, While):
                    self.block(st.cond)
                self.block(st.body)
                st.carried = tuple(sorted(set(st.carried) | {self.name(c) for c in carries}))
            elif isinstance(st, If):
                self.block(st.then)
                self.block(st.orelse)
            out.append(st)
        block.stmts[:] = out

    def _carries(self, loop: For | While) -> list:
        return [m.node for m in self._markers_in(loop.body) if m.kind == "carry_update"]

    def _markers_in(self, block: Block):
        return [st for st in block.stmts if isinstance(st, Marker)]

    def marker(self, m: Marker) -> list:
        if id(m.node) not in self.need:
            return []
        loc = self.kernel.loc
        if m.kind == "join":
            parts = [self.ref(p) for p in m.node.parts]
            return [Let(self.name(m.node), Op(OpKind.JOIN_TOKENS, tuple(parts), TokenT(), loc))]
        if m.kind in ("carry_init", "phi_init"):
            init = m.node.init if m.kind == "carry_init" else m.node.before
            return [Let(self.name(m.node), Op(OpKind.COPY, (self.ref(init),), TokenT(), loc))]
        return [Let(self.name(m.node), Op(OpKind.COPY, (self.ref(m.value),), TokenT(), loc), update=True)]

    def memory_op(self, st) -> Let | Do:
        op = st.op
        node = self.inputs[id(st)]
        result = next(iter(self._results.get(id(st), ())), None)
        # A view op on the array's entry token whose result nobody needs keeps the implicit token
        # of its view; everything else names its input token explicitly.
        implicit = isinstance(node, Root) and op.kind in (OpKind.LOAD, OpKind.STORE) and result is None
        attrs = dict(op.attrs)
        attrs["token"] = None if implicit else self.name(node)
        attrs["result_token"] = self.name(result) if result is not None else None
        new = Op(op.kind, op.args, op.ty, op.loc, tuple(sorted(attrs.items())))
        if isinstance(st, Let):
            return Let(st.name, new, st.update)
        return Do(new)

    def run(self, results: dict[int, list]) -> None:
        self._results = results
        self.block(self.kernel.body)
        roots = [Let(name, Op(OpKind.ENTRY_TOKEN, (Ref(a, self.kernel.param_by_ident(a).ty),), TokenT(),
                              self.kernel.loc))
                 for a, name in sorted(self.roots.items())]
        self.kernel.body.stmts[:0] = roots


def _open_memory_conditions(block: Block) -> None:
    """`while <memory op in the test>` (a spin lock's `while ct.atomic_cas(..) == 1`) -> `while True` whose
    body computes the test first and breaks when it is false, as cuTile's loop does: the test's tokens are
    then the loop's carried values, which the body and the code after the loop wait for (a Rust `while`
    condition block can hand nothing on: its names are local to it, and cutile-rs carries nothing
    assigned there)."""
    for st in block.stmts:
        for inner in _children(st):
            _open_memory_conditions(inner)
        if isinstance(st, While) and st.test is not None and _effects(st.cond):
            leave = If(st.test, Block([]), Block([Break(st.loc)]), st.loc)
            st.body.stmts[:0] = [*st.cond.stmts, leave]
            st.cond, st.test = Block([]), None


def _children(st) -> tuple[Block, ...]:
    if isinstance(st, For):
        return (st.body,)
    if isinstance(st, While):
        return st.blocks
    if isinstance(st, If):
        return (st.then, st.orelse)
    return ()


def order_memory(kernel: Kernel, naming: Naming) -> None:
    """Give every memory operation of the kernel its cuTile input token (in place)."""
    _open_memory_conditions(kernel.body)
    assign = _Assign()
    assign.block(kernel.body, {}, None)
    needed = _needed(assign.inputs)
    # Results of memory ops that some needed node reads (they must be bound by the emitter).
    results: dict[int, list] = {}
    for n in needed:
        if isinstance(n, Result):
            results.setdefault(id(n.stmt), []).append(n)
    _Materialize(kernel, naming, assign.inputs, {id(n) for n in needed}).run(results)

