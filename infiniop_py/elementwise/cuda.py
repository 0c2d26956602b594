"""NVIDIA side of the elementwise framework: source generation, planning and launch.

Planning happens once at create (see the kernel list in elementwise.cuh); calculate only
checks pointer alignment for the vectorised paths and launches a pre-packed call.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import BLOCK, CudaKernel, ctype, grid_for
from ..cuda.runtime import current_stream_ptr, stream_ptr
from ..dtypes import itemsize
from ..layout import collapse, max_offset, pack_strided_meta
from ..spec import Info

TEMPLATE = (Path(__file__).parent / "elementwise.cuh").read_text()
UNROLL = 1  # 16-byte packs per thread per step on the dense path (1, 2, 4, 8 measured within 1%; 1 best)
# Dense-path kernel shape: "vec1" (ew_vec, one pack per thread), "vec2" (two packs in flight),
# "vec1m8" (ew_vec asking ptxas for 8 resident blocks, i.e. <= 32 registers: full occupancy; a
# kernel that would spill under that cap falls back to "vec1"), "pipe" (ew_pipe: one wave, next
# pack loaded ahead). Measured on the H200 at 8192^2 (docs/perf/pointwise.md): vec1m8 is the best
# or within 1% on cheap ops (exp, relu, add, tanh: vec1 used 36-40 registers, 75% occupancy);
# "pipe" is best for the long gelu bodies and vec2 for sigmoid/silu. DENSE_BY_OP maps an
# operator to its shape; IOP_EW_DENSE overrides both per descriptor (read at create, for A/B).
# Default since the final H200 check of this round (every elementwise/pointwise op at 8192^2,
# f32/f16/bf16, one process per shape, docs/perf/pointwise.md "Default dense shape"): "ex1" is
# never slower than vec1m8 by more than noise and fixes where (f16/bf16 128 -> 111 us), equal
# (f32 163 -> 140, bf16 94 -> 80), clip f32 (269 -> 245) and div f32 (199 -> 188).
DENSE = "ex1"
DENSE_SHAPES = ("vec1", "vec2", "vec1m8", "pipe", "ex1", "ex2", "ex4", "ex2w")
# ew_exact shapes: (packs per thread U, threads per block NT).
EXACT = {"ex1": (1, 128), "ex2": (2, 128), "ex4": (4, 128), "ex2w": (2, 256)}
# The "exN" shapes (ew_exact: 128 threads, N packs each, all loads first, exact grid; "ex2w": 256
# threads) measured on the H200 at 8192^2 (docs/perf/pointwise.md, second round); keys "op/<bytes
# of the widest operand>" map the measured winners per dtype class.
DENSE_BY_OP: dict[str, str] = {
    "gelu": "pipe",
    "gelu_backward": "pipe",
    "sigmoid": "vec2",
    "silu": "vec2",
    "exp/4": "ex1",
    "exp/2": "ex1",
    "relu/4": "ex1",
    "sigmoid/4": "ex1",
    "sigmoid/2": "ex2",
    "silu/4": "ex1",
    "silu/2": "ex2",
    "gelu/4": "ex1",
    "gelu/2": "ex4",
    "gelu_backward/4": "ex4",
    "gelu_backward/2": "ex2w",
    "tanh/4": "ex1",
    "tanh/2": "ex1",
}
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


def chosen_shape(op: str | None, width: int) -> str:
    """The measured dense shape for an operator (DENSE_BY_OP keys: "op" or "op/<widest operand
    bytes>"), without the IOP_EW_DENSE override."""
    return DENSE_BY_OP.get(f"{op}/{width}") or DENSE_BY_OP.get(op, DENSE)


def dense_shape(op: str | None = None, width: int = 0) -> str:
    """The dense shape a descriptor uses: IOP_EW_DENSE (A/B runs) or ``chosen_shape``."""
    shape = os.environ.get("IOP_EW_DENSE") or chosen_shape(op, width)
    return shape if shape in DENSE_SHAPES else DENSE


def _spills(mod, name: str) -> bool:
    try:
        return int(mod.kernels[name].local_size_bytes) > 0
    except Exception:  # noqa: BLE001 - attribute unavailable: trust the cap
        return False


def dense_name(name, tout, tins, nin, vec, shape):
    t = _targs(name, tout, tins)
    if shape == "pipe":
        return f"ew_pipe<{t}, {nin}, {vec}>"
    if shape == "vec1m8":
        return f"ew_vec<{t}, {nin}, {vec}, 1, 8>"
    if shape in EXACT:
        u, nt = EXACT[shape]
        return f"ew_exact<{t}, {nin}, {vec}, {u}, {nt}>"
    return f"ew_vec<{t}, {nin}, {vec}, {2 if shape == 'vec2' else UNROLL}>"


def vec_names(name, tout, tins, nin, vec, shape=None):
    t = _targs(name, tout, tins)
    return [dense_name(name, tout, tins, nin, vec, shape or dense_shape()), f"ew_vec<{t}, {nin}, 1, 1>"]


def resident_blocks(func_ptr: int, device_id: int) -> int:
    """Blocks of BLOCK threads resident on the whole GPU for a kernel (one wave)."""
    from ..cuda import runtime

    sm = runtime.properties(device_id)["sm_count"]
    try:
        from cupy_backends.cuda.api import driver

        per_sm = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(func_ptr, BLOCK, 0))
    except Exception:  # noqa: BLE001 - older CuPy: assume full occupancy
        per_sm = 2048 // BLOCK
    return sm * max(1, per_sm)


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

    def __init__(self, info: Info, handle, name: str, expr: str, reads, attr_names):
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
            shape_ = dense_shape(info.op, max(sizes))
            names = vec_names(name, tout, tins, nin, vec, shape_)
            mod = get_module(src, names, dev)
            if shape_ == "vec1m8" and _spills(mod, names[0]):
                shape_ = "vec1"
                names = vec_names(name, tout, tins, nin, vec, shape_)
                mod = get_module(src, names, dev)
            n_arg = ctypes.c_longlong(n)
            if shape_ in EXACT:
                u, nt = EXACT[shape_]
                blocks, threads = max(1, -(-(n // vec) // (u * nt))), nt
            else:
                per = BLOCK * (2 if shape_ == "vec2" else UNROLL)
                blocks, threads = max(1, min(-(-(n // vec) // per), 1 << 20)), BLOCK
            if shape_ == "pipe":
                blocks = max(1, min(blocks, resident_blocks(mod.ptr[names[0]], dev)))
            self.fast = Launch(mod.ptr[names[0]], (blocks,), (threads,), [*args, n_arg, scal])
            self.slow = Launch(mod.ptr[names[1]], (grid_for(n, BLOCK, dev),), (BLOCK,), [*args, n_arg, scal])
            self.align = [(i, vec * sz) for i, sz in zip(idx, sizes, strict=True)]
            self.path = f"vec{vec}" if shape_ == "vec1" else f"vec{vec}-{shape_}"
            self._set_align(len(order))
            self.launch = self._launch_aligned
            return
        tiled = None if wide else tiled_plan(shape, strides)
        if tiled is not None:
            a, b, batch, smask = tiled
            tile = tile_size(sizes)
            tname = tiled_name(name, tout, tins, nin, tile, smask, index)
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


def make_nvidia(name: str, expr: str, reads, attr_names, combos, op: str | None = None):
    """Factory for the descriptor; ``factory.compile_units()`` lists instantiations for the compile check.

    Every dtype combination is compiled on each path; the broadcast/staging masks, which do
    not change the types involved, are represented by the first input's mask. The dense path
    is checked in the shapes a descriptor of ``op`` (default ``name``) selects: the default and
    the op's measured entry. Other shapes, reachable only through the IOP_EW_DENSE tuning
    switch, compile on demand at create (the GPU tests run every shape on a few ops).
    """
    op = op or name

    def factory(info: Info, handle):
        return ElementwiseKernel(info, handle, name, expr, reads, attr_names)

    def compile_units():
        names = []
        nin = len(reads)
        for out_dt, in_dts in combos():
            tout = ctype(out_dt)
            tins = [ctype(d) for d in in_dts] + ["char"] * (3 - nin)
            sizes = [itemsize(d) for d in (out_dt, *in_dts)]
            vec = max(1, 16 // max(sizes))
            names += vec_names(name, tout, tins, nin, vec, DENSE)
            chosen = chosen_shape(op, max(sizes))
            if chosen != DENSE:
                names.append(dense_name(name, tout, tins, nin, vec, chosen))
            names += [strided_name(name, tout, tins, nin, ix) for ix in ("unsigned int", "long long")]
            if vec > 1:
                names += [rowvec_name(name, tout, tins, nin, vec, m) for m in ((0, 2) if nin else (0,))]
            if nin:
                names += [tiled_name(name, tout, tins, nin, tile_size(sizes), 2, ix) for ix in ("unsigned int", "long long")]
        return [(source_for(name, expr, reads, attr_names), names)]

    factory.compile_units = compile_units
    return factory
