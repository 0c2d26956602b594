"""NVIDIA side of the elementwise framework: source generation, planning and launch."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import BLOCK, CudaKernel, ctype, grid_for
from ..layout import collapse, max_offset, pack_strided_meta
from ..spec import Info

TEMPLATE = (Path(__file__).parent / "elementwise.cuh").read_text()


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


def kernel_names(name: str, tout: str, tins, nin: int, vec: int, index: str | None) -> list[str]:
    targs = ", ".join([f"Op_{name}", tout, *tins])
    if index is None:
        return [f"ew_vec<{targs}, {nin}, {vec}>", f"ew_vec<{targs}, {nin}, 1>"]
    return [f"ew_strided<{targs}, {nin}, {index}>"]


def scalars_blob(values) -> bytes:
    vals = [float(v) for v in values] + [0.0] * (4 - len(values))
    return struct.pack("<4d", *vals)


class ElementwiseKernel(CudaKernel):
    def __init__(self, info: Info, handle, name: str, expr: str, reads, attr_names):
        super().__init__(handle)
        order = list(info.tensors)
        out_d = info.tensors[info.out_name]
        in_ds = [info.tensors[r] for r in reads]
        self.n = out_d.numel
        if self.n == 0:
            self.launches = None
            return
        nin = len(reads)
        tout = ctype(out_d.dtype)
        tins = [ctype(d.dtype) for d in in_ds] + ["char"] * (3 - nin)
        sizes = [out_d.itemsize] + [d.itemsize for d in in_ds]
        shape, strides = collapse(out_d.shape, [out_d.strides] + [d.strides for d in in_ds])
        self.contiguous = all(all(s == 1 for s in st) for st in strides) and len(shape) <= 1
        src = source_for(name, expr, reads, attr_names)
        idx = [order.index(info.out_name)] + [order.index(r) for r in reads]
        ptr_args = [Slot(i) for i in idx] + [ctypes.c_void_p(0) for _ in range(3 - nin)]
        scal = scalars_blob([info.attrs[a] for a in attr_names])
        if self.contiguous:
            vec = max(1, 16 // max(sizes))
            names = kernel_names(name, tout, tins, nin, vec, None)
            mod = get_module(src, names, handle.device_id)
            n_arg = ctypes.c_longlong(self.n)
            self.vec_launch = Launch(
                mod.ptr[names[0]], (grid_for(self.n // vec, BLOCK, handle.device_id),), (BLOCK,), [*ptr_args, n_arg, scal]
            )
            self.scalar_launch = Launch(
                mod.ptr[names[1]], (grid_for(self.n, BLOCK, handle.device_id),), (BLOCK,), [*ptr_args, n_arg, scal]
            )
            self.align = [(i, vec * sz) for i, sz in zip(idx, sizes)]
            self.launch = self._launch_contiguous
        else:
            wide = self.n >= 2**31 or any(max_offset(shape, st) >= 2**31 for st in strides)
            index = "long long" if wide else "unsigned int"
            names = kernel_names(name, tout, tins, nin, 1, index)
            mod = get_module(src, names, handle.device_id)
            meta = pack_strided_meta(shape, strides)
            self.strided_launch = Launch(
                mod.ptr[names[0]], (grid_for(self.n, BLOCK, handle.device_id),), (BLOCK,), [*ptr_args, meta, scal]
            )
            self.launch = self.strided_launch_call

    def launch(self, ptrs, ws_ptr, rt, stream):
        return  # empty tensor: nothing to do

    def _launch_contiguous(self, ptrs, ws_ptr, rt, stream):
        for i, a in self.align:
            if ptrs[i] % a:
                self.scalar_launch(ptrs, ws_ptr, stream)
                return
        self.vec_launch(ptrs, ws_ptr, stream)

    def strided_launch_call(self, ptrs, ws_ptr, rt, stream):
        self.strided_launch(ptrs, ws_ptr, stream)


def make_nvidia(name: str, expr: str, reads, attr_names, combos):
    """Factory for the descriptor; ``factory.compile_units()`` lists every instantiation for the compile check."""

    def factory(info: Info, handle):
        return ElementwiseKernel(info, handle, name, expr, reads, attr_names)

    def compile_units():
        from ..dtypes import itemsize

        names = []
        nin = len(reads)
        for out_dt, in_dts in combos():
            tout = ctype(out_dt)
            tins = [ctype(d) for d in in_dts] + ["char"] * (3 - nin)
            vec = max(1, 16 // max(itemsize(d) for d in (out_dt, *in_dts)))
            names += kernel_names(name, tout, tins, nin, vec, None)
            names += kernel_names(name, tout, tins, nin, 1, "unsigned int")
            names += kernel_names(name, tout, tins, nin, 1, "long long")
        return [(source_for(name, expr, reads, attr_names), names)]

    factory.compile_units = compile_units
    return factory
