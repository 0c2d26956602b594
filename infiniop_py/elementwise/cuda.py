"""NVIDIA side of the elementwise framework: source generation, planning and launch.

Planning happens once at create (see the kernel list in elementwise.cuh); calculate only
checks pointer alignment for the vectorised paths and launches a pre-packed call.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path
from typing import NamedTuple

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import BLOCK, CudaKernel, ctype, grid_for
from ..cuda.runtime import current_stream_ptr, stream_ptr
from ..dtypes import itemsize
from ..layout import collapse, max_offset, pack_strided_meta
from ..planner import Rule, always, first_match
from ..spec import Info

TEMPLATE = (Path(__file__).parent / "elementwise.cuh").read_text()


class Dense(NamedTuple):
    """A kernel of the dense path (every operand dense in one order): ``kernel`` "exact"
    (ew_exact: ``packs`` 16-byte packs per thread, ``threads`` per block, a grid covering the
    packs exactly), "vec" (ew_vec: a grid-stride loop with ``packs`` packs in flight per thread)
    or "pipe" (ew_pipe over about one resident wave, the next pack loaded ahead)."""

    kernel: str
    packs: int
    threads: int


# The named dense configs the rule tables choose from (docs/perf/pointwise.md, "Default dense shape").
DENSE = {
    "ex1": Dense("exact", 1, 128),
    "ex2": Dense("exact", 2, 128),
    "ex4": Dense("exact", 4, 128),
    "ex2w": Dense("exact", 2, 256),
    "vec2": Dense("vec", 2, BLOCK),
    "pipe": Dense("pipe", 1, BLOCK),
}


class DenseProblem(NamedTuple):
    """What a dense-path rule looks at: ``width``, the bytes of the widest operand."""

    width: int


def widest(nbytes: int):
    """Rule condition: the widest operand has ``nbytes`` bytes (4: f32, 2: f16/bf16)."""
    return lambda p: p.width == nbytes


# The default table; an operator declares its own with ``elementwise_op(dense_rules=...)``.
DENSE_RULES = (Rule("ew.dense", always, "ex1"),)


def dense_by_width(op: str, f32: str, half: str, f64: str) -> tuple[Rule, ...]:
    """An operator's dense-path table by operand width: rules ``<op>.dense.f32`` (widest operand
    of 4 bytes), ``<op>.dense.half`` (2 bytes) and ``<op>.dense.f64`` (the rest), choosing those
    ``DENSE`` configs."""
    return (
        Rule(f"{op}.dense.f32", widest(4), f32),
        Rule(f"{op}.dense.half", widest(2), half),
        Rule(f"{op}.dense.f64", always, f64),
    )


ROWS = 8  # tile rows per block on the tiled path
MAX_BATCH = 6


def op_struct(name: str, expr: str, reads, attr_names) -> str:
    """The functor an elementwise operator contributes to the shared template."""
    args = list(reads) + [f"unused{i}_" for i in range(3 - len(reads))]
    body = expr if "return" in expr else f"return {expr};"
    locals_ = "".join(f"const T {a} = (T)s.v[{i}]; " for i, a in enumerate(attr_names))
    return (
        f"struct Op_{name} {{\n"
        f"  template <class TO, class T, class A, class B, class C>\n"
        f"  static __device__ __forceinline__ auto apply(const Scalars& s, A {args[0]}, B {args[1]}, C {args[2]}) {{\n"
        f"    {locals_}{body}\n  }}\n}};\n"
    )


def source_for(name: str, expr: str, reads, attr_names) -> str:
    return TEMPLATE + "\n" + op_struct(name, expr, reads, attr_names)


def _targs(name, tout, tins):
    return ", ".join([f"Op_{name}", tout, *tins])


def dense_config(rules, width: int) -> str:
    """The dense config ``rules`` choose for operands whose widest has ``width`` bytes."""
    return first_match(rules, DenseProblem(width), "elementwise dense path")[1]


def dense_name(name, tout, tins, nin, vec, config: str) -> str:
    t = _targs(name, tout, tins)
    c = DENSE[config]
    if c.kernel == "pipe":
        return f"ew_pipe<{t}, {nin}, {vec}>"
    if c.kernel == "exact":
        return f"ew_exact<{t}, {nin}, {vec}, {c.packs}, {c.threads}>"
    return f"ew_vec<{t}, {nin}, {vec}, {c.packs}>"


def vec_names(name, tout, tins, nin, vec, config: str) -> list[str]:
    """The dense kernel of ``config`` and the one-element ew_vec taken for unaligned pointers."""
    return [dense_name(name, tout, tins, nin, vec, config), f"ew_vec<{_targs(name, tout, tins)}, {nin}, 1, 1>"]


def resident_blocks(func_ptr: int, device_id: int, threads: int = BLOCK) -> int:
    """Blocks of ``threads`` threads resident on the whole GPU for a kernel (one wave): the
    driver's occupancy figure per SM, else (older CuPy) as many as the SM's thread limit allows."""
    from ..cuda import runtime

    props = runtime.properties(device_id)
    per_sm = runtime.occupancy(func_ptr, threads)
    if per_sm is None:  # older CuPy: assume full occupancy (2048 threads where unreported)
        per_sm = (props.get("threads_per_sm") or 2048) // threads
    return props["sm_count"] * max(1, per_sm)


def strided_name(name, tout, tins, nin, index):
    return f"ew_strided<{_targs(name, tout, tins)}, {nin}, {index}>"


def rowvec_name(name, tout, tins, nin, vec, bmask):
    return f"ew_rowvec<{_targs(name, tout, tins)}, {nin}, {vec}, {bmask}>"


def tiled_name(name, tout, tins, nin, tile, smask, index):
    return f"ew_tiled<{_targs(name, tout, tins)}, {nin}, {tile}, {ROWS}, {smask}, {index}>"


def scalars_blob(values) -> bytes:
    vals = [float(v) for v in values] + [0.0] * (4 - len(values))
    return struct.pack("<4d", *vals)


def tile_size(sizes) -> int:
    """64-wide tiles when every operand is <= 2 bytes (a warp row then moves >= 64 bytes)."""
    return 64 if max(sizes) <= 2 else 32


def rowvec_plan(shape, strides, sizes):
    """(vec, meta bytes, broadcast mask) when rows are contiguous or broadcast for every operand."""
    if not shape or strides[0][-1] != 1 or any(st[-1] not in (0, 1) for st in strides[1:]):
        return None
    vec = 16 // max(sizes)
    inner = shape[-1]
    if vec < 2 or inner % vec:
        return None
    for st in strides:
        if st[-1] == 1 and any(s % vec for s in st[:-1]):
            return None
    nvec = 1
    for d in shape:
        nvec *= d
    nvec //= vec
    if nvec >= 2**31 or any(max_offset(shape, st) >= 2**31 for st in strides):
        return None
    vshape = tuple(shape[:-1]) + (inner // vec,)
    vstrides = [tuple(st[:-1]) + (vec if st[-1] == 1 else 0,) for st in strides]
    bmask = sum(1 << k for k, st in enumerate(strides) if k > 0 and st[-1] == 0)
    return vec, pack_strided_meta(vshape, vstrides), bmask


def tiled_plan(shape, strides):
    """(a, b, batch dims, staged mask) when an input is transposed relative to the output."""
    if len(shape) < 2 or strides[0][-1] != 1:
        return None
    a = len(shape) - 1
    transposed = [k for k in range(1, len(strides)) if strides[k][a] not in (0, 1)]
    b = None
    for k in transposed:
        cands = [d for d in range(len(shape) - 1) if strides[k][d] == 1]
        if cands:
            b = cands[0]
            break
    if b is None:
        return None
    smask = sum(1 << k for k in transposed if strides[k][b] == 1)
    batch = [d for d in range(len(shape)) if d not in (a, b)]
    if len(batch) > MAX_BATCH:
        return None
    return a, b, batch, smask


def pack_tiled_meta(shape, strides, a, b, batch) -> bytes:
    st4 = [list(st) for st in strides] + [[0] * len(shape)] * (4 - len(strides))
    pad = MAX_BATCH - len(batch)
    nb = 1
    for d in batch:
        nb *= shape[d]
    blob = struct.pack("<2q", shape[a], shape[b])
    blob += struct.pack("<4q", *(st[a] for st in st4)) + struct.pack("<4q", *(st[b] for st in st4))
    blob += struct.pack("<6q", *([shape[d] for d in batch] + [1] * pad))
    for st in st4:
        blob += struct.pack("<6q", *([st[d] for d in batch] + [0] * pad))
    return blob + struct.pack("<qii", nb, len(batch), 0)


class ElementwiseKernel(CudaKernel):
    """Plans one elementwise call at create; ``launch`` is bound to the chosen path."""

    def __init__(self, info: Info, handle, name: str, expr: str, reads, attr_names, dense_rules=DENSE_RULES):
        super().__init__(handle)
        dev = handle.device_id
        order = list(info.tensors)
        out_d = info.tensors[info.out_name]
        in_ds = [info.tensors[r] for r in reads]
        self.n = n = out_d.numel
        self.path = "empty"
        if n == 0:
            self.launch = self._noop
            return
        nin = len(reads)
        tout = ctype(out_d.dtype)
        tins = [ctype(d.dtype) for d in in_ds] + ["char"] * (3 - nin)
        sizes = [out_d.itemsize] + [d.itemsize for d in in_ds]
        shape, strides = collapse(out_d.shape, [out_d.strides] + [d.strides for d in in_ds])
        src = source_for(name, expr, reads, attr_names)
        idx = [order.index(info.out_name)] + [order.index(r) for r in reads]
        args = [Slot(i) for i in idx] + [ctypes.c_void_p(0) for _ in range(3 - nin)]
        scal = scalars_blob([info.attrs[a] for a in attr_names])
        wide = n >= 2**31 or any(max_offset(shape, st) >= 2**31 for st in strides)
        index = "long long" if wide else "unsigned int"
        self.align = []
        if len(shape) <= 1 and all(all(s == 1 for s in st) for st in strides):
            vec = max(1, 16 // max(sizes))
            config = dense_config(dense_rules, max(sizes))
            c = DENSE[config]
            names = vec_names(name, tout, tins, nin, vec, config)
            mod = get_module(src, names, dev)
            n_arg = ctypes.c_longlong(n)
            if c.kernel == "exact":
                blocks = max(1, -(-(n // vec) // (c.packs * c.threads)))
            else:
                blocks = max(1, min(-(-(n // vec) // (c.packs * c.threads)), 1 << 20))
            if c.kernel == "pipe":
                blocks = max(1, min(blocks, resident_blocks(mod.ptr[names[0]], dev)))
            self.fast = Launch(mod.ptr[names[0]], (blocks,), (c.threads,), [*args, n_arg, scal])
            self.slow = Launch(mod.ptr[names[1]], (grid_for(n, BLOCK, dev),), (BLOCK,), [*args, n_arg, scal])
            self.align = [(i, vec * sz) for i, sz in zip(idx, sizes, strict=True)]
            self.path = f"vec{vec}-{config}"
            self._set_align(len(order))
            self.launch = self._launch_aligned
            return
        tiled = None if wide else tiled_plan(shape, strides)
        if tiled is not None:
            a, b, batch, smask = tiled
            tile = tile_size(sizes)
            tname = tiled_name(name, tout, tins, nin, tile, smask, "unsigned int")  # never wide here
            mod = get_module(src, [tname], dev)
            nb = 1
            for d in batch:
                nb *= shape[d]
            grid = (-(-shape[a] // tile), min(-(-shape[b] // tile), 65535), min(nb, 65535))
            self.fast = Launch(mod.ptr[tname], grid, (tile, ROWS), [*args, pack_tiled_meta(shape, strides, a, b, batch), scal])
            self.path = f"tiled{tile}"
            self.launch = self._launch_one
            return
        sname = strided_name(name, tout, tins, nin, index)
        meta = pack_strided_meta(shape, strides)
        row = rowvec_plan(shape, strides, sizes)
        if row is not None:
            vec, vmeta, bmask = row
            rname = rowvec_name(name, tout, tins, nin, vec, bmask)
            mod = get_module(src, [rname, sname], dev)
            self.fast = Launch(mod.ptr[rname], (grid_for(n // vec, BLOCK, dev),), (BLOCK,), [*args, vmeta, scal])
            self.slow = Launch(mod.ptr[sname], (grid_for(n, BLOCK, dev),), (BLOCK,), [*args, meta, scal])
            self.align = [(i, vec * sz) for k, (i, sz) in enumerate(zip(idx, sizes, strict=True)) if strides[k][-1] == 1]
            self.path = f"rowvec{vec}"
            self._set_align(len(order))
            self.launch = self._launch_aligned
            return
        mod = get_module(src, [sname], dev)
        self.fast = Launch(mod.ptr[sname], (grid_for(n, BLOCK, dev),), (BLOCK,), [*args, meta, scal])
        self.path = "strided"
        self.launch = self._launch_one

    def _set_align(self, nptrs: int) -> None:
        """One OR over all pointers when every tensor needs the same alignment (the usual case)."""
        aligns = {a for _, a in self.align}
        self.same_align = len(aligns) == 1 and len(self.align) == nptrs
        self.mask = (aligns.pop() - 1) if self.same_align else 0

    def _noop(self, ptrs, ws_ptr, rt, stream):
        return

    def _launch_one(self, ptrs, ws_ptr, rt, stream):
        self.fast(ptrs, ws_ptr, stream)

    def _launch_aligned(self, ptrs, ws_ptr, rt, stream):
        if self.same_align:
            bits = 0
            for p in ptrs:
                bits |= p
            if bits & self.mask:
                self.slow(ptrs, ws_ptr, stream)
                return
        else:
            for i, a in self.align:
                if ptrs[i] % a:
                    self.slow(ptrs, ws_ptr, stream)
                    return
        self.fast(ptrs, ws_ptr, stream)

    def __call__(self, ptrs, ws_ptr, rt, stream):
        # Hot path: resolve the stream and launch with no further layers.
        if self._multi:
            return CudaKernel.__call__(self, ptrs, ws_ptr, rt, stream)
        self.launch(ptrs, ws_ptr, rt, current_stream_ptr() if stream is None else stream_ptr(stream))


def make_nvidia(name: str, expr: str, reads, attr_names, combos, dense_rules=DENSE_RULES):
    """Factory for the descriptor; ``factory.compile_units()`` lists instantiations for the compile check.

    Every dtype combination is compiled on each path; the broadcast/staging masks, which do
    not change the types involved, are represented by the first input's mask. The tiled path
    is taken only below 2^31 elements and offsets, so only with 32-bit indices. The dense path
    is compiled in the config ``dense_rules`` choose for each combination, the one a
    descriptor of that combination launches.
    """

    def factory(info: Info, handle):
        return ElementwiseKernel(info, handle, name, expr, reads, attr_names, dense_rules)

    def compile_units():
        names = []
        nin = len(reads)
        for out_dt, in_dts in combos():
            tout = ctype(out_dt)
            tins = [ctype(d) for d in in_dts] + ["char"] * (3 - nin)
            sizes = [itemsize(d) for d in (out_dt, *in_dts)]
            vec = max(1, 16 // max(sizes))
            names += vec_names(name, tout, tins, nin, vec, dense_config(dense_rules, max(sizes)))
            names += [strided_name(name, tout, tins, nin, ix) for ix in ("unsigned int", "long long")]
            if vec > 1:
                names += [rowvec_name(name, tout, tins, nin, vec, m) for m in ((0, 2) if nin else (0,))]
            if nin:
                names.append(tiled_name(name, tout, tins, nin, tile_size(sizes), 2, "unsigned int"))
        return [(source_for(name, expr, reads, attr_names), names)]

    factory.compile_units = compile_units
    factory.dense_rules = dense_rules
    return factory
