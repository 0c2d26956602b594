"""NVIDIA whole-tensor equal (torch.equal): a set-true launch, then a grid-stride check."""

from __future__ import annotations

from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype, grid_for
from infiniop_py.elementwise.logical import TRUTH_TYPES, truth_type
from infiniop_py.layout import collapse, max_offset, pack_strided_meta

SOURCE = (Path(__file__).parent / "kernel.cu").read_text()
BLOCK = 256


def _names(tname: str) -> list[str]:
    return ["equal_set_true", f"equal_all<{tname}, unsigned int>", f"equal_all<{tname}, long long>"]


def compile_units():
    names = ["equal_set_true"]
    for t in TRUTH_TYPES:
        names += _names(ctype(t))[1:]
    return [(SOURCE, names)]


class EqualAllKernel(CudaKernel):
    def __init__(self, info, handle):
        super().__init__(handle)
        order = list(info.tensors)
        a, b = info.tensors["a"], info.tensors["b"]
        t = ctype(truth_type(a.dtype))
        shape, (sa, sb) = collapse(a.shape, [a.strides, b.strides])
        n = a.numel
        wide = n >= 2**31 or max(max_offset(shape, sa), max_offset(shape, sb)) >= 2**31
        names = ["equal_set_true", f"equal_all<{t}, {'long long' if wide else 'unsigned int'}>"]
        mod = get_module(SOURCE, names, handle.device_id)
        ic, ia, ib = order.index("c"), order.index("a"), order.index("b")
        self.launches = [Launch(mod.ptr[names[0]], (1,), (1,), [Slot(ic)])]
        if n:
            meta = pack_strided_meta(shape or (1,), [sa or (0,), sb or (0,)])
            grid = grid_for(n, BLOCK, handle.device_id, waves=2)
            self.launches.append(Launch(mod.ptr[names[1]], (grid,), (BLOCK,), [Slot(ic), Slot(ia), Slot(ib), meta]))

    def launch(self, ptrs, ws_ptr, rt, stream):
        for launch in self.launches:
            launch(ptrs, ws_ptr, stream)


__all__ = ["EqualAllKernel", "compile_units"]
