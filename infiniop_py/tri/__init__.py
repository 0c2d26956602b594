"""tril and triu (ops.md §5.6): their spec builder, NumPy and CUDA backends (``tri.cu``)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, runtime
from ..dtypes import SI, DType, F
from ..layout import collapse
from ..spec import Attr, Checker, Info, OpSpec, inp, out
from ..status import Status

SOURCE = (Path(__file__).parent / "tri.cu").read_text()
DTYPES = F | SI | {DType.U8, DType.BOOL}
UTYPE = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
MAXB = 6
META_FMT = "<6q6q6q6qqqiiii"  # struct TriMeta (tri.cu)
BLOCK = 256


def validate(check: Checker) -> Info:
    o, i = check["output"], check["input"]
    check.dtype_in("output", DTYPES)
    check.same_dtype("output", "input")
    check.same_shape("output", "input")
    if o.ndim < 2:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'input' must be at least 2-d [..., M, N], got shape {list(i.shape)}")
    check.writable("output")
    return Info(check.op, check.tensors, check.attrs)


def make_cpu(lower: bool):
    def cpu(info: Info):
        o = info["output"]
        m, n = o.shape[-2:]
        diag = min(max(info.attrs["diagonal"], -m), n)  # j - i lies in [1 - m, n - 1]: same mask, no overflow

        mask = []  # the M x N mask, built at the first calculate (create stays O(1) in the size)

        def run(views, ws, rt):
            out_v, in_v = views["output"], views["input"]
            if out_v.size:
                if not mask:
                    rows, cols = np.arange(m)[:, None], np.arange(n)[None, :]
                    mask.append((cols <= rows + diag) if lower else (cols >= rows + diag))
                np.copyto(out_v, np.where(mask[0], in_v, np.zeros((), out_v.dtype)))

        return run

    return cpu


def kernel_names():
    return [f"tri_kernel<{u}, {v}>" for s, u in UTYPE.items() for v in sorted({1, 16 // s})]


class TriKernel(CudaKernel):
    def __init__(self, info: Info, handle, lower: bool):
        super().__init__(handle)
        o, i = info["output"], info["input"]
        self.empty = o.numel == 0
        if self.empty:
            return
        size = o.itemsize
        m, n = o.shape[-2:]
        bshape, (bso, bsi) = collapse(o.shape[:-2], [o.strides[:-2], i.strides[:-2]])
        if len(bshape) > MAXB:  # pragma: no cover - would need > 6 non-mergeable batch dims
            raise ValueError("too many batch dims")
        nb = 1
        for d in bshape:
            nb *= d
        pad = MAXB - len(bshape)
        so_r, so_c = o.strides[-2:]
        si_r, si_c = i.strides[-2:]
        vec = 16 // size
        ok_vec = (
            vec > 1 and so_c == 1 and si_c == 1 and n % vec == 0
            and all(s % vec == 0 for s in (so_r, si_r, *bso, *bsi))
        )  # fmt: skip
        if not ok_vec:
            vec = 1
        self.vec_bytes = vec * size
        self.same_layout = o.strides == i.strides

        def meta(inplace):
            return struct.pack(
                META_FMT, m, n, so_r, so_c, si_r, si_c,
                *(list(bshape) + [1] * pad), *(list(bso) + [0] * pad), *(list(bsi) + [0] * pad),
                nb, info.attrs["diagonal"], len(bshape), int(lower), int(inplace), 0,
            )  # fmt: skip

        dev = handle.device_id
        names = [f"tri_kernel<{UTYPE[size]}, {vec}>", f"tri_kernel<{UTYPE[size]}, 1>"]
        mod = get_module(SOURCE, sorted(set(names)), dev)
        sm = runtime.properties(dev)["sm_count"]

        def launches(v, name):
            per_row = -(-n // v)
            block = min(BLOCK, max(32, -(-per_row // 32) * 32))
            gx = max(1, min(-(-per_row // block), 1024))
            gy = max(1, min(m, 65535))
            gz = max(1, min(nb, 65535, max(1, sm * 64 // max(gx * gy, 1))))
            return [Launch(mod.ptr[name], (gx, gy, gz), (block,), [Slot(0), Slot(1), meta(ip)]) for ip in (0, 1)]

        self.fast = launches(vec, names[0])
        self.slow = launches(1, names[1]) if vec > 1 else self.fast

    def launch(self, ptrs, ws_ptr, rt, stream):
        if self.empty:
            return
        ip = 1 if (ptrs[0] == ptrs[1] and self.same_layout) else 0
        if ptrs[0] % self.vec_bytes or ptrs[1] % self.vec_bytes:
            self.slow[ip](ptrs, ws_ptr, stream)
        else:
            self.fast[ip](ptrs, ws_ptr, stream)


def make_spec(name: str, lower: bool) -> OpSpec:
    def nvidia(info, handle):
        return TriKernel(info, handle, lower)

    nvidia.compile_units = lambda: [(SOURCE, kernel_names())]
    fn = "tril" if lower else "triu"

    def reference(input, diagonal=0):
        import torch

        return getattr(torch, fn)(input, diagonal)

    return OpSpec(
        name=name,
        stem=name.capitalize(),
        tensors=(out("output"), inp("input")),
        attrs=(Attr("diagonal", "int", 0),),
        validate=validate,
        dtypes=DTYPES,
        cpu=make_cpu(lower),
        nvidia=nvidia,
        reference=reference,
        torch=f"torch.{fn}(input, diagonal)",
        summary=f"{'lower' if lower else 'upper'} triangle (j - i {'<=' if lower else '>='} diagonal), rest 0",
        inplace=(("output", "input"),),
        kernel_sources=("../../infiniop_py/tri/tri.cu",),
    )
