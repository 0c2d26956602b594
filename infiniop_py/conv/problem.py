"""The problems the NVIDIA planners of conv, conv_transpose and conv_backward see: one
convolution stage (``Conv``: forward or transposed) or a weight gradient (``WeightGrad``), with
the layout helpers their kernels' launch arguments use.

Problems are described in three spatial dims (1-d and 2-d get leading dims of size 1). Each
carries the streaming-multiprocessor count of the device it is planned for (``sm_count``, from
the handle's device; the rules size grids against it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infiniop_py.cuda import runtime
from infiniop_py.dtypes import DType
from infiniop_py.spatial import pad3
from infiniop_py.tensor import TensorDescriptor

GPU_DTYPES = (DType.F16, DType.BF16, DType.F32, DType.F64)


def data_strides(d: TensorDescriptor) -> tuple:
    """(N, C, D, H, W) strides of an (N, C, *S) tensor; missing spatial dims get stride 0."""
    return tuple(d.strides[:2]) + pad3(d.strides[2:], 0)


def align(nbytes: int, to: int = 256) -> int:
    return -(-nbytes // to) * to


def acc_size(dtype: DType) -> int:
    """Bytes of an accumulator / partial sum (ConvAcc<T>: f32 for half types, f64 for f32 and f64)."""
    return 4 if dtype in (DType.F16, DType.BF16) else 8


@dataclass(frozen=True)
class Conv:
    """One convolution stage in the forward direction or transposed.

    Forward: y[n, g·ng + j, o] = Σ x[n, g·cg + c, o·s - p + κ·d]·W(g, j, c, κ).
    Transposed: y[n, g·ng + j, i·s - p + κ·d] += x[n, g·cg + c, i]·W(g, j, c, κ).
    W(g, j, c, κ) = w[(g·gwn + j)·wsn + (g·gwc + c)·wsc + κ·wsk]: conv's w (Cout, Cin/G, *k) has
    gwn = ng, gwc = 0; conv_transpose's and grad_input's w (Cx, Cy/G, *k) has gwn = 0, gwc = cg.
    """

    dtype: DType
    nd: int
    x: TensorDescriptor
    w: TensorDescriptor
    y: TensorDescriptor
    b: TensorDescriptor | None
    groups: int
    cg: int  # x channels per group
    ng: int  # y channels per group
    k: tuple
    s: tuple
    p: tuple
    d: tuple
    transposed: bool
    slots: tuple  # Slot indices of (y, x, w, b); b None when absent
    tf32: bool = False  # the allow_tf32 attribute (cuDNN plans only)
    sm_count: int = field(kw_only=True)  # streaming multiprocessors of the device

    @property
    def batch(self) -> int:
        return self.x.shape[0]

    @property
    def L(self) -> tuple:  # noqa: N802
        return tuple(self.x.shape[2:])

    @property
    def O(self) -> tuple:  # noqa: N802, E743
        return tuple(self.y.shape[2:])

    @property
    def kvol(self) -> int:
        return math.prod(self.k)

    @property
    def weight_strides(self) -> tuple:
        """(wsn, wsc, gwn, gwc)."""
        ws = self.w.strides
        if self.transposed:
            return ws[1], ws[0], 0, self.cg
        return ws[0], ws[1], self.ng, 0

    @property
    def macs(self) -> int:
        side = self.x if self.transposed else self.y
        return self.batch * math.prod(side.shape[2:]) * self.groups * self.ng * self.cg * self.kvol


@dataclass(frozen=True)
class WeightGrad:
    """grad_weight (Cout, Cin/G, *k) and grad_bias (Cout,)? from grad_output and input."""

    dtype: DType
    nd: int
    go: TensorDescriptor
    x: TensorDescriptor
    gw: TensorDescriptor
    gb: TensorDescriptor | None
    groups: int
    cg: int
    ng: int
    k: tuple
    s: tuple
    p: tuple
    d: tuple
    slots: tuple  # Slot indices of (gw, gb, go, x)
    tf32: bool = False  # the allow_tf32 attribute (cuDNN plans only)
    sm_count: int = field(kw_only=True)  # streaming multiprocessors of the device


def key(op: str, c: Conv) -> tuple:
    """What a measured choice is cached by: everything the kernels' speed depends on."""
    return (
        op,
        c.dtype,
        c.x.shape,
        c.x.strides,
        c.w.shape,
        c.w.strides,
        c.y.shape,
        c.y.strides,
        c.b is not None,
        c.s,
        c.p,
        c.d,
        c.groups,
    )


def device_sms(handle) -> int:
    """Streaming multiprocessors of a handle's device."""
    return int(runtime.properties(handle.device_id)["sm_count"])


def forward_problem(info, transposed: bool, sm_count: int) -> Conv:
    """The Conv of conv (x -> y) or conv_transpose (x -> y by stride phases) from its Info,
    planned for a device of ``sm_count`` SMs."""
    g = info.geo
    x = info["x"]
    return Conv(
        x.dtype, g.nd, x, info["w"], info["y"], info["b"], g.groups, g.cin_g, g.cout_g, g.k, g.s, g.p, g.d,
        transposed, (0, 1, 2, 3), bool(info.attrs.get("allow_tf32")), sm_count=sm_count,
    )  # fmt: skip
