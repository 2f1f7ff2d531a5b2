"""Sorting a row in LLVM IR, for the native renderer (codegen/cpu/native.py): what codegen/cpu/numba_math.py's
sort_row and sort_row_bytes compute, step for step, so a kernel that sorts no longer needs Numba to compile its
Python (a first np.sort on the numba device: ~3 s of Numba's compiler, ~0.1 s as IR).

- sort_row: runs of SORT_RUN sorted by insertion, then merged in passes of doubling width between the row and
  a scratch copy (malloc'd); stable; NaN after every number, as NumPy's order.
- sort_row_bytes (one-byte keys: a mask sorted as bytes): a counting sort, two passes, stable.

Each is a function of the kernel's module (internal linkage), one per key and position type, called with the
row, its positions (or null) and the count.
"""

from __future__ import annotations

from llvmlite import ir

I1, I8, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(64)
SORT_RUN = 16  # runs this long are sorted by insertion first (numba_math.sort_row's)


def sort_row(module: ir.Module, keys: ir.Type, positions: ir.Type | None, is_float: bool, signed: bool) -> ir.Function:
    """The function `void (keys*, positions*, i64 n)` sorting the first n keys (positions move with them)."""
    name = f"tj_sort_row.{keys}.{positions or 'none'}.{'s' if signed else 'u'}"
    return _function(module, name, keys, positions, lambda s: s.merge_sort(), is_float, signed)


def sort_row_bytes(module: ir.Module, keys: ir.Type, positions: ir.Type | None, flip: int) -> ir.Function:
    """The function `void (keys*, positions*, i64 n)` for one-byte keys (i8, or i1): a stable counting sort;
    `flip` is 0x80 for signed keys (their order is the byte's with its top bit flipped), else 0."""
    name = f"tj_sort_row_bytes.{keys}.{positions or 'none'}.{flip}"
    return _function(module, name, keys, positions, lambda s: s.counting_sort(flip), False, False)


def _function(module, name: str, keys, positions, write, is_float: bool, signed: bool) -> ir.Function:
    """The module's function `name`, written by write(_Sorter) the first time."""
    found = module.globals.get(name)
    if found is not None:
        return found
    row_types = [ir.PointerType(keys), ir.PointerType(positions or I8), I64]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), row_types), name)
    fn.linkage = "internal"
    write(_Sorter(fn, keys, positions, is_float, signed))
    return fn


def counted_loop(b: ir.IRBuilder, start, stop, step, carried=(), flags=()):
    """A counted loop `for v in range(start, stop, step)` at b, carrying values from step to step (each given its
    first value): (v, the carried values' phis, close), close(*next values) ending the body and leaving b after
    the loop."""
    fn = b.function
    before, header = b.block, fn.append_basic_block("loop")
    body, done = fn.append_basic_block("body"), fn.append_basic_block("done")
    b.branch(header)
    b.position_at_end(header)
    var = b.phi(I64)
    var.add_incoming(start, before)
    phis = []
    for first in carried:
        phi = b.phi(first.type)
        phi.add_incoming(first, before)
        phis.append(phi)
    b.cbranch(b.icmp_signed("<", var, stop), body, done)
    b.position_at_end(body)

    def close(*following):
        for phi, value in zip(phis, following):
            phi.add_incoming(value, b.block)
        var.add_incoming(b.add(var, step, flags=flags), b.block)
        b.branch(header)
        b.position_at_end(done)

    return var, phis, close


def declared(module: ir.Module, name: str) -> ir.Function:
    """C's malloc or free, declared in the module (the loaders bind it to the process's)."""
    found = module.globals.get(name)
    if found is not None:
        return found
    if name == "malloc":
        return ir.Function(module, ir.FunctionType(ir.PointerType(I8), [I64]), name)
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType(I8)]), name)


class _Sorter:
    def __init__(self, fn: ir.Function, keys: ir.Type, positions: ir.Type | None, is_float: bool, signed: bool):
        self.fn, self.key_t, self.pos_t = fn, keys, positions
        self.is_float, self.signed = is_float, signed
        self.keys, self.positions, self.n = fn.args
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))

    # -- helpers --
    def const(self, v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def at(self, base, i):
        return self.b.gep(base, [i], inbounds=True)

    def before(self, a, b_):
        """a goes strictly before b: the smaller number; every number before NaN (NumPy's order)."""
        b = self.b
        if not self.is_float:
            return b.icmp_signed("<", a, b_) if self.signed else b.icmp_unsigned("<", a, b_)
        less = b.fcmp_ordered("<", a, b_)
        nan_b = b.fcmp_unordered("uno", b_, b_)
        number_a = b.fcmp_ordered("ord", a, a)
        return b.or_(less, b.and_(nan_b, number_a))

    def loop(self, start, stop, step=None, carried=()):
        return counted_loop(self.b, start, stop, step if step is not None else self.const(1), carried)

    def smaller(self, a, c):
        return self.b.select(self.b.icmp_signed("<", a, c), a, c)

    def heap(self, ty: ir.Type, count) -> ir.Value:
        size = ir.Constant(I64, _abi_size(ty))
        memory = self.b.call(declared(self.fn.module, "malloc"), [self.b.mul(count, size)])
        return self.b.bitcast(memory, ir.PointerType(ty))

    def release(self, p) -> None:
        self.b.call(declared(self.fn.module, "free"), [self.b.bitcast(p, ir.PointerType(I8))])

    def copy(self, src, dst, count, ty) -> None:
        i, _, close = self.loop(self.const(0), count)
        self.b.store(self.b.load(self.at(src, i)), self.at(dst, i))
        close()

    # -- the sorts --
    def merge_sort(self) -> None:
        b, keys, pos, n = self.b, self.keys, self.positions, self.n
        run = self.const(SORT_RUN)
        # runs sorted by insertion
        start, _, close_runs = self.loop(self.const(0), n, run)
        end = self.smaller(b.add(start, run), n)
        i, _, close_i = self.loop(b.add(start, self.const(1)), end)
        key = b.load(self.at(keys, i))
        position = b.load(self.at(pos, i)) if self.pos_t is not None else None
        first = b.sub(i, self.const(1))
        entry = b.block
        header, shift, place = (self.fn.append_basic_block(n_) for n_ in ("shift.test", "shift", "place"))
        b.branch(header)
        b.position_at_end(header)
        j = b.phi(I64)
        j.add_incoming(first, entry)
        inside = self.fn.append_basic_block("shift.compare")
        b.cbranch(b.icmp_signed(">=", j, start), inside, place)
        b.position_at_end(inside)
        b.cbranch(self.before(key, b.load(self.at(keys, j))), shift, place)
        b.position_at_end(shift)
        up = b.add(j, self.const(1))
        b.store(b.load(self.at(keys, j)), self.at(keys, up))
        if self.pos_t is not None:
            b.store(b.load(self.at(pos, j)), self.at(pos, up))
        j.add_incoming(b.sub(j, self.const(1)), shift)
        b.branch(header)
        b.position_at_end(place)
        to = b.add(j, self.const(1))
        b.store(key, self.at(keys, to))
        if self.pos_t is not None:
            b.store(position, self.at(pos, to))
        close_i()
        close_runs()
        # passes merging runs of doubling width, between the row and a scratch copy
        merge, finished = self.fn.append_basic_block("merge"), self.fn.append_basic_block("finished")
        b.cbranch(b.icmp_signed(">", n, run), merge, finished)
        b.position_at_end(merge)
        other_keys = self.heap(self.key_t, n)
        other_pos = self.heap(self.pos_t, n) if self.pos_t is not None else None
        entry = b.block
        header, body, done = (self.fn.append_basic_block(n_) for n_ in ("pass", "pass.body", "passes.done"))
        b.branch(header)
        b.position_at_end(header)
        width = b.phi(I64)
        src_k, dst_k = b.phi(other_keys.type), b.phi(other_keys.type)
        width.add_incoming(run, entry)
        src_k.add_incoming(keys, entry)
        dst_k.add_incoming(other_keys, entry)
        if other_pos is not None:
            src_p, dst_p = b.phi(other_pos.type), b.phi(other_pos.type)
            src_p.add_incoming(pos, entry)
            dst_p.add_incoming(other_pos, entry)
        b.cbranch(b.icmp_signed("<", width, n), body, done)
        b.position_at_end(body)
        twice = b.add(width, width)
        lo, _, close_lo = self.loop(self.const(0), n, twice)
        mid = self.smaller(b.add(lo, width), n)
        hi = self.smaller(b.add(lo, twice), n)
        out, (i_, j_), close_out = self.loop(lo, hi, carried=(lo, mid))  # (the merge's two cursors)
        left_open = b.icmp_signed("<", i_, mid)
        right_open = b.icmp_signed("<", j_, hi)
        # (keys compared only while both runs have some, branching as numba_math's `or`/`and` do: a select of
        # both loads made each step wait for the last one's, 2x slower on a row of 5,000)
        left_done = b.not_(left_open)  # (one run done: the other's next, the right's when the left is done)
        start_block = b.block
        both, decided = self.fn.append_basic_block("merge.both"), self.fn.append_basic_block("merge.decided")
        b.cbranch(b.and_(left_open, right_open), both, decided)
        b.position_at_end(both)
        compared = self.before(b.load(self.at(src_k, j_)), b.load(self.at(src_k, i_)))
        both_end = b.block
        b.branch(decided)
        b.position_at_end(decided)
        take_right = b.phi(I1)
        take_right.add_incoming(compared, both_end)
        take_right.add_incoming(left_done, start_block)
        from_ = b.select(take_right, j_, i_)
        b.store(b.load(self.at(src_k, from_)), self.at(dst_k, out))
        if other_pos is not None:
            b.store(b.load(self.at(src_p, from_)), self.at(dst_p, out))
        close_out(
            b.select(take_right, i_, b.add(i_, self.const(1))), b.select(take_right, b.add(j_, self.const(1)), j_)
        )
        close_lo()
        width.add_incoming(twice, b.block)
        src_k.add_incoming(dst_k, b.block)
        dst_k.add_incoming(src_k, b.block)
        if other_pos is not None:
            src_p.add_incoming(dst_p, b.block)
            dst_p.add_incoming(src_p, b.block)
        b.branch(header)
        b.position_at_end(done)
        back, freed = self.fn.append_basic_block("copy.back"), self.fn.append_basic_block("free")
        b.cbranch(b.icmp_unsigned("!=", b.ptrtoint(src_k, I64), b.ptrtoint(keys, I64)), back, freed)
        b.position_at_end(back)
        self.copy(src_k, keys, n, self.key_t)
        if other_pos is not None:
            self.copy(src_p, pos, n, self.pos_t)
        b.branch(freed)
        b.position_at_end(freed)
        self.release(other_keys)
        if other_pos is not None:
            self.release(other_pos)
        b.branch(finished)
        b.position_at_end(finished)
        b.ret_void()

    def counting_sort(self, flip: int) -> None:
        b, keys, pos, n = self.b, self.keys, self.positions, self.n
        counts = b.alloca(I64, size=self.const(257))
        v, _, close = self.loop(self.const(0), self.const(257))
        b.store(self.const(0), self.at(counts, v))
        close()

        def byte(i):
            k = b.load(self.at(keys, i))
            return b.xor(b.zext(k, I64), self.const(flip))

        i, _, close = self.loop(self.const(0), n)
        slot = self.at(counts, b.add(byte(i), self.const(1)))
        b.store(b.add(b.load(slot), self.const(1)), slot)
        close()
        v, _, close = self.loop(self.const(0), self.const(256))
        nxt = self.at(counts, b.add(v, self.const(1)))
        b.store(b.add(b.load(nxt), b.load(self.at(counts, v))), nxt)
        close()
        ordered = self.heap(self.key_t, n)
        moved = self.heap(self.pos_t, n) if self.pos_t is not None else None
        i, _, close = self.loop(self.const(0), n)
        slot = self.at(counts, byte(i))
        to = b.load(slot)
        b.store(b.add(to, self.const(1)), slot)
        b.store(b.load(self.at(keys, i)), self.at(ordered, to))
        if moved is not None:
            b.store(b.load(self.at(pos, i)), self.at(moved, to))
        close()
        self.copy(ordered, keys, n, self.key_t)
        self.release(ordered)
        if moved is not None:
            self.copy(moved, pos, n, self.pos_t)
            self.release(moved)
        b.ret_void()


def _abi_size(ty: ir.Type) -> int:
    """The bytes of a row's element (the types of native.py's rows)."""
    if isinstance(ty, ir.IntType):
        return max(1, (ty.width + 7) // 8)
    if isinstance(ty, ir.FloatType):
        return 4
    if isinstance(ty, ir.DoubleType):
        return 8
    raise TypeError(f"no size for a row of {ty}")
