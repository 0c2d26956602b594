"""GGUF files laid out exactly as upstream InfiniOP's generator scripts lay them out.

Upstream (InfiniTensor/InfiniCore, ``test/infiniop-test/test_generate/``) writes its files with a
thin ``gguf.GGUFWriter`` subclass: the architecture key first, then ``test_count`` as u64, then
each test's keys in the order its ``write_test`` adds them, then its tensors. Python int lists go
through ``add_array`` and so become INT32 arrays; ``.strides`` arrays are stored innermost first,
``.shape`` arrays in natural order; bool tensors are stored with ggml type Q8_K, one byte per
element. This module reproduces those layouts (our own code, written against the gguf package
directly, not through infiniop_py's writer) for a few cases of each operator, so that the runner
can be checked against them: ``python test/upstream_fixtures.py OUTDIR`` writes them all.

Each ``write_<op>`` documents which upstream behaviour it reproduces.
"""

from __future__ import annotations

import itertools
import os
import sys

import ml_dtypes
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter

GGML = {
    np.dtype(np.float16): Q.F16,
    np.dtype(np.float32): Q.F32,
    np.dtype(np.float64): Q.F64,
    np.dtype(np.bool_): Q.Q8_K,  # upstream's convention for bool: one byte per element
    np.dtype(np.int8): Q.I8,
    np.dtype(np.int16): Q.I16,
    np.dtype(np.int32): Q.I32,
    np.dtype(np.int64): Q.I64,
    np.dtype(ml_dtypes.bfloat16): Q.BF16,
}


class UpstreamStyleWriter:
    """Collects tests as upstream's writer does: ``key(name)`` is ``test.{current}.{name}``."""

    def __init__(self, path: str):
        self.w = GGUFWriter(path, "infiniop-test")  # adds general.architecture first
        self.tests = []

    def add(self, write_test) -> None:
        self.tests.append(write_test)

    def save(self) -> None:
        self.w.add_uint64("test_count", len(self.tests))
        for i, write_test in enumerate(self.tests):
            self.index = i
            self.w.add_string(self.key("op_name"), write_test.op_name)
            write_test(self)
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()

    def key(self, name: str) -> str:
        return f"test.{self.index}.{name}"

    def array(self, name: str, values) -> None:
        self.w.add_array(self.key(name), [int(v) for v in values])  # Python ints: INT32 arrays

    def tensor(self, name: str, a: np.ndarray, ggml=None) -> None:
        self.w.add_tensor(self.key(name), a, raw_dtype=ggml if ggml is not None else GGML[a.dtype])

    def shaped(self, name: str, a: np.ndarray, ggml=None) -> None:
        """The tensor followed by its ``<name>_shape`` INT32 array."""
        self.tensor(name, a, ggml)
        self.array(f"{name}_shape", a.shape)


def _test(op_name: str):
    def wrap(fn):
        fn.op_name = op_name
        return fn

    return wrap


def rev(strides):
    """Upstream's ``gguf_strides``: strides stored innermost first."""
    return list(strides)[::-1] if strides else None


def contiguous(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def write_add(path: str, rng: np.random.Generator) -> None:
    """add.py (InfiniCore): inputs with zero strides are stored reduced (the unique data only),
    ``.strides`` keys (reversed, INT32) only where a layout is given, ``.shape`` keys on a, b, c,
    ``c`` an all-zero-dims placeholder, ``ans`` F64 computed from the broadcast inputs. Key order:
    strides, then shapes; tensors a, b, c, ans."""
    cases = [  # shape, a strides, b strides, c strides (natural order)
        ((13, 4), None, None, (20, 1)),
        ((13, 4), (10, 1), (10, 1), (10, 1)),
        ((13, 4), (0, 1), None, (4, 1)),
        ((13, 4, 4), (20, 4, 1), (20, 4, 1), (20, 4, 1)),
        ((13, 4, 4), (4, 0, 1), (0, 4, 1), (16, 4, 1)),
    ]
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for shape, sa, sb, sc in cases:
            a, b = rng.random(shape).astype(dtype), rng.random(shape).astype(dtype)

            def unique(x, s):  # broadcast along zero strides, keep one slice of each
                if not s or 0 not in s:
                    return x, x
                first = x[tuple(slice(0, 1) if st == 0 else slice(None) for st in s)]
                return np.broadcast_to(first, x.shape), first

            a_full, a_stored = unique(a, sa)
            b_full, b_stored = unique(b, sb)

            @_test("add")
            def t(w, shape=shape, sa=sa, sb=sb, sc=sc, a=a_stored, b=b_stored, af=a_full, bf=b_full, dtype=dtype):
                for n, s in (("a", sa), ("b", sb), ("c", sc)):
                    if s is not None:
                        w.array(f"{n}.strides", rev(s))
                for n in "abc":
                    w.array(f"{n}.shape", shape)
                w.tensor("a", np.ascontiguousarray(a))
                w.tensor("b", np.ascontiguousarray(b))
                w.tensor("c", np.empty((0,) * len(shape), dtype=dtype))
                w.tensor("ans", af.astype(np.float64) + bf.astype(np.float64), Q.F64)

            w.add(t)
    w.save()


def write_sub(path: str, rng: np.random.Generator) -> None:
    """sub.py (older layout, e.g. a fork's copy): no ``.shape`` keys at all, ``c`` stored with
    full-size random data instead of a placeholder (the output's data is ignored and its shape is
    the stored one), the same ``.strides`` on a, b and c, values in [-5e-4, 5e-4), ans F64."""
    cases = [((4, 5), None), ((4, 5), (1, 4)), ((1, 2048), (1, 2048)), ((6, 64), (1, 64)), ((4, 48, 64), None)]
    w = UpstreamStyleWriter(path)
    for shape, strides in cases:
        for dtype in (np.float32, np.float16):
            a, b, c = (1e-3 * rng.random(shape).astype(dtype) - 5e-4 for _ in range(3))

            @_test("sub")
            def t(w, strides=strides, a=a, b=b, c=c):
                for n in "abc":
                    if strides is not None:
                        w.array(f"{n}.strides", rev(strides))
                for n, x in (("a", a), ("b", b), ("c", c)):
                    w.tensor(n, x)
                w.tensor("ans", a.astype(np.float64) - b.astype(np.float64), Q.F64)

            w.add(t)
    w.save()


def write_mul(path: str, rng: np.random.Generator) -> None:
    """mul.py (InfiniCore): ``ans`` is in the *input* dtype (numpy's f16 product) and an extra
    ``ans_fp64`` follows, which must be ignored; ``.shape`` keys first, then ``.strides``; c's
    strides default to contiguous; column-major and gapped input layouts."""
    cases = [
        ((2, 3), (3, 1), (1, 2), (3, 1)),
        ((2, 3), (1, 2), (3, 1), (1, 2)),
        ((4, 6), (1, 4), (1, 5), (6, 1)),
        ((1, 64), (1, 1), (64, 1), (1, 1)),
        ((2, 4, 64), (4 * 64, 64, 1), (1, 2, 8), (4 * 64, 64, 1)),
        ((4, 12, 16), None, (1, 4, 48), None),
    ]
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for shape, sa, sb, sc in cases:
            a, b = (1e-3 * rng.random(shape).astype(dtype) - 5e-4 for _ in range(2))
            sc = sc if sc is not None else contiguous(shape)

            @_test("mul")
            def t(w, shape=shape, sa=sa, sb=sb, sc=sc, a=a, b=b, dtype=dtype):
                for n in "abc":
                    w.array(f"{n}.shape", shape)
                for n, s in (("a", sa), ("b", sb), ("c", sc)):
                    if s is not None:
                        w.array(f"{n}.strides", rev(s))
                w.tensor("a", a)
                w.tensor("b", b)
                w.tensor("c", np.empty((0,) * len(shape), dtype=dtype))
                w.tensor("ans", np.multiply(a, b))
                w.tensor("ans_fp64", np.multiply(a.astype(np.float64), b.astype(np.float64)))

            w.add(t)
    w.save()


def _fill(op: str, path: str, rng: np.random.Generator, value: float) -> None:
    """zeros.py / ones.py (InfiniCore forks): every dtype including bool, whose x and y are stored
    as Q8_K (which stock ``GGUFReader`` refuses to open); y a placeholder with ``.shape`` and
    ``.strides`` (contiguous when no layout is given); ``ans`` F64 of x's shape, also for integer
    and bool outputs; x's data is random (all True for bool)."""
    cases = [((13, 4), None, None), ((13, 4), (10, 1), (10, 1)), ((13, 4, 4), (20, 4, 1), (20, 4, 1)), ((5, 7), None, (1, 5))]
    w = UpstreamStyleWriter(path)
    for dtype in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64):
        for shape, sx, sy in cases:
            x = rng.random(shape).astype(dtype)

            @_test(op)
            def t(w, shape=shape, sx=sx, sy=sy, x=x, dtype=dtype):
                w.array("x.shape", shape)
                w.array("y.shape", shape)
                if sx is not None:
                    w.array("x.strides", rev(sx))
                w.array("y.strides", rev(sy if sy is not None else contiguous(shape)))
                w.tensor("x", x)
                w.tensor("y", np.empty((0,) * len(shape), dtype=dtype))
                w.tensor("ans", np.full(x.shape, value, dtype=np.float64), Q.F64)

            w.add(t)
    w.save()


def write_zeros(path: str, rng: np.random.Generator) -> None:
    _fill("zeros", path, rng, 0.0)


def write_ones(path: str, rng: np.random.Generator) -> None:
    _fill("ones", path, rng, 1.0)


def write_rearrange(path: str, rng: np.random.Generator) -> None:
    """rearrange.py (InfiniCore forks): ``dst`` carries full-size junk data (``torch.empty``)
    rather than a placeholder, both tensors have ``.shape`` keys, ``src`` is stored contiguous with
    its layout in ``.strides``, and ``ans`` is in src's dtype, compared bytewise."""
    cases = [
        ((4, 4), (1, 4), (4, 1)),
        ((4, 6, 64), (64, 4 * 64, 1), (6 * 64, 64, 1)),
        ((2, 2, 2, 4), (16, 8, 4, 1), (16, 8, 1, 2)),
        ((3, 4, 7, 5, 9), tuple(contiguous((3, 4, 7, 5, 9))), (1, 3, 12, 84, 420)),
    ]
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for shape, ss, ds in cases:
            src = rng.random(shape).astype(dtype)
            junk = rng.integers(0, 256, size=src.nbytes, dtype=np.uint8).view(dtype).reshape(shape)

            @_test("rearrange")
            def t(w, shape=shape, ss=ss, ds=ds, src=src, junk=junk):
                w.array("src.shape", shape)
                w.array("dst.shape", shape)
                w.array("src.strides", rev(ss))
                w.array("dst.strides", rev(ds))
                w.tensor("src", src)
                w.tensor("dst", junk)
                w.tensor("ans", src.copy())

            w.add(t)
    w.save()


def junk(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random bytes in ``dtype`` (``torch.empty``'s contents in an output upstream stores whole)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return rng.integers(0, 256, size=n, dtype=np.uint8).view(dtype).reshape(shape)


def _scatter_last_wins(shape, dim, index, src) -> np.ndarray:
    """torch's ``zeros(shape).scatter_(dim, index, src)`` on the CPU: row-major order, last write wins."""
    out = np.zeros(shape, dtype=src.dtype)
    for pos in np.ndindex(*index.shape):
        dst = list(pos)
        dst[dim] = int(index[pos])
        out[tuple(dst)] = src[pos]
    return out


def write_scatter(path: str, rng: np.random.Generator) -> None:
    """scatter.py (the contributors' branch, op_name ``scatter_``): ``dim`` INT32, then per tensor
    ``.shape`` and (when a layout is given, reversed) ``.strides``; ``output`` carries full-size
    junk data (``torch.empty``), ``index`` is I64 with duplicates, ``input`` is the source, and
    ``ans`` (zeros with the source scattered in) is stored in the data dtype. One file per dtype
    upstream; here F32 and F16 cases share one file (the F32 ones once failed as ggml type -1)."""
    cases = [  # output shape, input shape, dim, index shape, input strides, output strides
        ((4, 4), (2, 4), 0, (2, 4), None, None),
        ((3, 4, 5), (3, 2, 5), 1, (3, 2, 5), (10, 5, 1), (20, 5, 1)),
        ((40, 30), (10, 30), 0, (10, 30), None, None),
        ((3, 4), (2, 4), 0, (2, 4), (1, 2), None),
        ((2, 3, 4), (2, 3, 4), 2, (2, 3, 4), None, None),
        ((5, 5), (3, 5), 0, (3, 5), None, None),
    ]
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for oshape, ishape, dim, xshape, istr, ostr in cases:
            src = (10 * rng.random(ishape) - 5).astype(dtype)
            index = rng.integers(0, oshape[dim], size=xshape, dtype=np.int64)
            out = junk(rng, oshape, dtype)

            @_test("scatter_")
            def t(w, oshape=oshape, ishape=ishape, dim=dim, xshape=xshape, istr=istr, ostr=ostr, src=src, index=index, out=out):
                w.w.add_int32(w.key("dim"), dim)
                w.array("output.shape", oshape)
                if ostr is not None:
                    w.array("output.strides", rev(ostr))
                w.tensor("output", out)
                w.array("index.shape", xshape)
                w.tensor("index", index)
                w.array("input.shape", ishape)
                if istr is not None:
                    w.array("input.strides", rev(istr))
                w.tensor("input", src)
                w.tensor("ans", _scatter_last_wins(oshape, dim, index, src))

            w.add(t)
    w.save()


# The one case of the contributors' linear and linear_backward generators whose w, shape (3, 4)
# with strides (6, 3), overlaps itself in either stride order: ILL-DEFINED.
LINEAR_ILL_DEFINED = 10
LINEAR_BACKWARD_ILL_DEFINED = 4


def write_linear(path: str, rng: np.random.Generator) -> None:
    """linear.py (the contributors' branch): ``x.strides``, ``w.strides`` and ``b.strides`` are
    written in natural order (``contiguous_gguf_strides`` or the case's strides, never reversed),
    ``y.strides`` in GGUF's reversed order; every tensor has ``.shape``; ``y`` carries full-size
    junk data (``torch.empty``); ``b`` is absent for bias-free cases; ``ans`` F64. Read as the
    format says, the natural-order strides of x (5, 4) are [1, 4], which overlap."""
    cases = [  # x shape, w shape, b shape, y shape, x strides, w strides, b strides (natural order)
        ((3, 4), (2, 4), (2,), (3, 2), None, None, None),
        ((5, 4), (3, 4), (3,), (5, 3), None, None, None),
        ((3, 4), (2, 4), None, (3, 2), None, None, None),
        ((5, 4), (3, 4), None, (5, 3), None, None, None),
        ((2, 3, 4), (5, 4), (5,), (2, 3, 5), None, None, None),
        ((1, 2, 3, 4), (6, 4), (6,), (1, 2, 3, 6), None, None, None),
        ((2, 3, 4), (5, 4), None, (2, 3, 5), None, None, None),
        ((1, 2, 3, 4), (6, 4), None, (1, 2, 3, 6), None, None, None),
        ((5, 10, 32), (64, 32), (64,), (5, 10, 64), None, None, None),
        ((5, 10, 32), (64, 32), None, (5, 10, 64), None, None, None),
        ((4, 4), (3, 4), (3,), (4, 3), (8, 2), (6, 3), (3,)),  # LINEAR_ILL_DEFINED
        ((2, 3, 4), (5, 4), (5,), (2, 3, 5), (24, 8, 2), (8, 2), (5,)),
    ]
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for xs, ws, bs, ys, sx, sw, sb in cases:
            x, wt = rng.random(xs).astype(dtype), rng.random(ws).astype(dtype)
            b = rng.random(bs).astype(dtype) if bs is not None else None
            ans = x.astype(np.float64) @ wt.astype(np.float64).T
            if b is not None:
                ans = ans + b.astype(np.float64)
            y = junk(rng, ys, dtype)

            @_test("linear")
            def t(w, xs=xs, ws=ws, bs=bs, ys=ys, sx=sx, sw=sw, sb=sb, x=x, wt=wt, b=b, ans=ans, y=y):
                w.array("x.shape", xs)
                w.array("x.strides", sx or contiguous(xs))  # natural order, not reversed
                w.tensor("x", x)
                w.array("w.shape", ws)
                w.array("w.strides", sw or contiguous(ws))
                w.tensor("w", wt)
                if b is not None:
                    w.array("b.shape", bs)
                    if sb is not None:
                        w.array("b.strides", sb)
                    w.tensor("b", b)
                w.array("y.shape", ys)
                w.array("y.strides", rev(contiguous(ys)))
                w.tensor("y", y)
                w.tensor("ans", ans, Q.F64)

            w.add(t)
    w.save()


def write_linear_backward(path: str, rng: np.random.Generator) -> None:
    """linear_backward.py (the contributors' branch): every ``.strides`` key in natural order;
    ``.shape`` on x, w, b, grad_y and the gradients; the gradients carry full-size junk data
    (``torch.empty``); ``b`` (data unused) requests ``grad_b``; ``ans_grad_x``, ``ans_grad_w``,
    ``ans_grad_b`` F64. One file per dtype upstream; here F32 and F16 share one file."""
    cases = [  # x, w, b, grad_y shapes; x, w, b, grad_y, grad_x, grad_w, grad_b strides (natural order)
        ((3, 4), (2, 4), (2,), (3, 2), None, None, None, None, None, None, None),
        ((5, 4), (3, 4), (3,), (5, 3), None, None, None, None, None, None, None),
        ((2, 3, 4), (5, 4), (5,), (2, 3, 5), None, None, None, None, None, None, None),
        ((1, 2, 3, 4), (6, 4), (6,), (1, 2, 3, 6), None, None, None, None, None, None, None),
        ((4, 4), (3, 4), (3,), (4, 3), (8, 2), (6, 3), (3,), (6, 2), (4, 1), (3, 1), (1,)),  # ILL-DEFINED
        ((2, 3, 4), (5, 4), (5,), (2, 3, 5), (24, 8, 2), (8, 2), (5,), (30, 10, 2), (24, 8, 2), (8, 2), (5,)),
        ((1, 3), (2, 3), (2,), (1, 2), None, None, None, None, None, None, None),
        ((6, 64), (16, 64), (16,), (6, 16), None, None, None, None, None, None, None),
        ((4, 8), (6, 8), None, (4, 6), None, None, None, None, None, None, None),
        ((2, 3, 5), (7, 5), None, (2, 3, 7), (30, 10, 2), (5, 1), None, (21, 3, 1), (30, 10, 2), (5, 1), None),
    ]
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for xs, ws, bs, gs, sx, sw, sb, sg, sgx, sgw, sgb in cases:
            x, wt, gy = (rng.random(s).astype(dtype) for s in (xs, ws, gs))
            b = rng.random(bs).astype(dtype) if bs is not None else None
            g2 = gy.astype(np.float64).reshape(-1, ws[0])
            answers = {
                "grad_x": (g2 @ wt.astype(np.float64)).reshape(xs),
                "grad_w": g2.T @ x.astype(np.float64).reshape(-1, ws[1]),
            }
            if b is not None:
                answers["grad_b"] = g2.sum(0)
            strides = {"x": sx, "w": sw, "b": sb, "grad_y": sg, "grad_x": sgx, "grad_w": sgw, "grad_b": sgb}
            shapes = {"x": xs, "w": ws, "b": bs, "grad_y": gs, "grad_x": xs, "grad_w": ws, "grad_b": bs}
            grads = {n: junk(rng, shapes[n], dtype) for n in answers}

            @_test("linear_backward")
            def t(w, x=x, wt=wt, b=b, gy=gy, answers=answers, strides=strides, shapes=shapes, grads=grads):
                data = {"x": x, "w": wt, "b": b, "grad_y": gy, **grads}
                for n in ("x", "w", "b", "grad_y", "grad_x", "grad_w", "grad_b"):
                    if data.get(n) is None:
                        continue
                    w.array(f"{n}.shape", shapes[n])
                    w.array(f"{n}.strides", strides[n] or contiguous(shapes[n]))  # natural order
                    w.tensor(n, data[n])
                for n, a in answers.items():
                    w.tensor(f"ans_{n}", a, Q.F64)

            w.add(t)
    w.save()


BATCH_NORM_BACKWARD_ILL_DEFINED = 3


def _batch_norm_backward(x, gy, weight, eps=1e-5):
    """Training-mode batch norm gradients in float64 (batch statistics over all but dim 1)."""
    axes = (0,) + tuple(range(2, x.ndim))
    keep = [1] * x.ndim
    keep[1] = -1
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    xhat = (x - mean) * inv
    g_bias = gy.sum(axis=axes)
    g_weight = (gy * xhat).sum(axis=axes)
    n = x.size // x.shape[1]
    g_input = weight.reshape(keep) * inv * (gy - g_bias.reshape(keep) / n - xhat * g_weight.reshape(keep) / n)
    return g_input, g_weight, g_bias


def write_batch_norm_backward(path: str, rng: np.random.Generator) -> None:
    """batch_norm_backward.py (the contributors' branch): ``.shape`` keys for every tensor except
    ``grad_bias`` (its shape comes from ``ans_grad_bias``); input strides reversed where a case
    gives them; every gradient an empty placeholder with reversed ``.strides``; no ``eps`` key
    (1e-5); ``ans_grad_input``, ``ans_grad_weight``, ``ans_grad_bias`` F64 from float64 training
    mode. Upstream's (2, 8, 5632) case with strides (22528, 5632, 1) overlaps itself; (2, 8, 40)
    with (160, 40, 1) here has the same fault (BATCH_NORM_BACKWARD_ILL_DEFINED)."""
    cases = [
        ((2, 6, 4), None),
        ((13, 2, 4), (10, 4, 1)),
        ((13, 4, 4), (20, 4, 1)),
        ((2, 8, 40), (160, 40, 1)),  # BATCH_NORM_BACKWARD_ILL_DEFINED
        ((4, 4, 40), (320, 40, 1)),
    ]
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for shape, strides in cases:
            c = [shape[1]]
            x, gy = rng.random(shape).astype(dtype), rng.random(shape).astype(dtype)
            weight, rmean, rvar = (rng.random(c).astype(dtype) for _ in range(3))
            answers = _batch_norm_backward(x.astype(np.float64), gy.astype(np.float64), weight.astype(np.float64))

            @_test("batch_norm_backward")
            def t(w, shape=shape, strides=strides, c=c, x=x, gy=gy, weight=weight, rmean=rmean, rvar=rvar, answers=answers):
                for n, s in (("input", shape), ("grad_output", shape), ("weight", c), ("running_mean", c), ("running_var", c)):
                    w.array(f"{n}.shape", s)
                w.array("grad_input.shape", shape)
                w.array("grad_weight.shape", c)  # and no grad_bias.shape
                if strides is not None:
                    w.array("input.strides", rev(strides))
                    w.array("grad_output.strides", rev(strides))
                w.array("grad_input.strides", rev(strides or contiguous(shape)))
                w.array("grad_weight.strides", rev(contiguous(c)))
                w.array("grad_bias.strides", rev(contiguous(c)))
                inputs = {"input": x, "grad_output": gy, "weight": weight, "running_mean": rmean, "running_var": rvar}
                for n, a in inputs.items():
                    w.tensor(n, a)
                w.tensor("grad_input", np.empty((0,) * len(shape), dtype=x.dtype))
                w.tensor("grad_weight", np.empty((0,), dtype=x.dtype))
                w.tensor("grad_bias", np.empty((0,), dtype=x.dtype))
                for n, a in zip(("grad_input", "grad_weight", "grad_bias"), answers):
                    w.tensor(f"ans_{n}", a, Q.F64)

            w.add(t)
    w.save()


# -- pooling (named-output style) ------------------------------------------------------------------
# (input shape, kernel_size, stride or None, padding, ceil_mode): scalars become length-1 arrays as
# in upstream's generators; stride None is left out of the file (stride = kernel_size).
POOL_CASES = [
    ((2, 3, 16), 3, 1, 0, False),
    ((1, 3, 19), 4, 3, 1, True),
    ((2, 3, 12, 12), 3, None, 1, False),
    ((1, 2, 11, 13), (3, 2), (2, 1), (1, 0), False),
    ((1, 1, 9, 9), 4, 3, 2, True),
    ((1, 2, 6, 7, 8), (2, 3, 2), (1, 2, 2), (1, 1, 1), False),
    ((1, 1, 7, 7, 7), 3, 2, 1, True),
]


def _pool_lists(n, kernel_size, stride, padding):
    def expand(v):
        v = [v] if isinstance(v, int) else list(v)
        return v * n if len(v) == 1 else v

    k = expand(kernel_size)
    return k, (k if stride is None else expand(stride)), expand(padding)


def _pool_reference(kind, x, go, kernel_size, stride, padding, ceil_mode):
    """float64 pooling by explicit windows (torch's rules: count_include_pad divisors; the first
    maximum wins a tie): (output, grad_input for ``go``) ."""
    n = x.ndim - 2
    k, s, p = _pool_lists(n, kernel_size, stride, padding)
    out_len = []
    for d in range(n):
        L = x.shape[2 + d]
        o = -(-(L + 2 * p[d] - k[d]) // s[d]) + 1 if ceil_mode else (L + 2 * p[d] - k[d]) // s[d] + 1
        if ceil_mode and (o - 1) * s[d] >= L + p[d]:
            o -= 1
        out_len.append(o)
    y = np.zeros(x.shape[:2] + tuple(out_len))
    gi = np.zeros(x.shape)
    for nc in np.ndindex(*x.shape[:2]):
        for o in np.ndindex(*out_len):
            start = [o[d] * s[d] - p[d] for d in range(n)]
            ranges = [range(max(start[d], 0), min(start[d] + k[d], x.shape[2 + d])) for d in range(n)]
            idx = [nc + i for i in itertools.product(*ranges)]
            if kind == "avg":
                div = np.prod([min(start[d] + k[d], x.shape[2 + d] + p[d]) - start[d] for d in range(n)])
                y[nc + o] = sum(x[i] for i in idx) / div
                if go is not None:
                    for i in idx:
                        gi[i] += go[nc + o] / div
            else:
                best = max(idx, key=lambda i: x[i])  # max() keeps the first of equal keys
                y[nc + o] = x[best]
                if go is not None:
                    gi[best] += go[nc + o]
    return y, gi


def _pool_input(rng, shape, dtype):
    """upstream's ``torch.randn(shape).clamp(-1, 1)``: about a third of the values are exactly
    +-1, so max windows hold ties."""
    return np.clip(rng.standard_normal(shape), -1, 1).astype(dtype)


def _pool_attrs(w, kernel_size, stride, padding, ceil_mode):
    w.array("kernel_size", [kernel_size] if isinstance(kernel_size, int) else kernel_size)
    if stride is not None:
        w.array("stride", [stride] if isinstance(stride, int) else stride)
    w.array("padding", [padding] if isinstance(padding, int) else padding)
    w.w.add_bool(w.key("ceil_mode"), ceil_mode)


def _write_pool(path: str, rng: np.random.Generator, kind: str, op_name: str) -> None:
    """averagepool.py / maxpool.py (InfiniCore): the named-output style of ops.md §6.0. ``input``
    stored in its dtype, then ``input_shape``; ``kernel_size``, ``stride`` (absent when the case
    has none) and ``padding`` as INT32 arrays, length 1 for a scalar; ``ceil_mode`` bool;
    ``output`` holds the F64 expected values, followed by ``output_shape``. No ``ans``, no
    ``.shape``/``.strides`` keys."""
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for shape, k, st, p, ceil in POOL_CASES:
            x = _pool_input(rng, shape, dtype)
            y, _ = _pool_reference(kind, x.astype(np.float64), None, k, st, p, ceil)

            @_test(op_name)
            def t(w, x=x, y=y, k=k, st=st, p=p, ceil=ceil):
                w.shaped("input", x)
                _pool_attrs(w, k, st, p, ceil)
                w.shaped("output", y, Q.F64)

            w.add(t)
    w.save()


def _write_pool_backward(path: str, rng: np.random.Generator, kind: str, op_name: str) -> None:
    """averagepool_backward.py / maxpool_backward.py (InfiniCore): ``grad_output`` and ``input`` in
    their dtype, the attributes as for the forward files, ``grad_input`` F64 expected values, and
    ``grad_output_shape``, ``input_shape``, ``grad_input_shape`` INT32 arrays (the avg file writes
    them after the tensors, the max file next to each tensor)."""
    w = UpstreamStyleWriter(path)
    for dtype in (np.float32, np.float16):
        for shape, k, st, p, ceil in POOL_CASES:
            x = _pool_input(rng, shape, dtype)
            y, _ = _pool_reference(kind, x.astype(np.float64), None, k, st, p, ceil)
            go = _pool_input(rng, y.shape, dtype)
            _, gi = _pool_reference(kind, x.astype(np.float64), go.astype(np.float64), k, st, p, ceil)

            @_test(op_name)
            def t(w, x=x, go=go, gi=gi, k=k, st=st, p=p, ceil=ceil):
                if kind == "avg":
                    w.tensor("grad_output", go)
                    w.tensor("input", x)
                    _pool_attrs(w, k, st, p, ceil)
                    w.tensor("grad_input", gi, Q.F64)
                    w.array("grad_output_shape", go.shape)
                    w.array("input_shape", x.shape)
                    w.array("grad_input_shape", gi.shape)
                else:
                    w.shaped("grad_output", go)
                    w.shaped("input", x)
                    _pool_attrs(w, k, st, p, ceil)
                    w.shaped("grad_input", gi, Q.F64)

            w.add(t)
    w.save()


def write_averagepool(path: str, rng: np.random.Generator) -> None:
    _write_pool(path, rng, "avg", "averagepool")


def write_averagepool_backward(path: str, rng: np.random.Generator) -> None:
    _write_pool_backward(path, rng, "avg", "averagepool_backward")


def write_maxpool(path: str, rng: np.random.Generator) -> None:
    _write_pool(path, rng, "max", "maxpool")


def write_maxpool_backward(path: str, rng: np.random.Generator) -> None:
    _write_pool_backward(path, rng, "max", "maxpool_backward")


FIXTURES = {
    "add": write_add,
    "sub": write_sub,
    "mul": write_mul,
    "zeros": write_zeros,
    "ones": write_ones,
    "rearrange": write_rearrange,
    "scatter": write_scatter,
    "linear": write_linear,
    "linear_backward": write_linear_backward,
    "batch_norm_backward": write_batch_norm_backward,
    "averagepool": write_averagepool,
    "averagepool_backward": write_averagepool_backward,
    "maxpool": write_maxpool,
    "maxpool_backward": write_maxpool_backward,
}

# Tests that have no right answer (ILL-DEFINED), by fixture: indices within each dtype's block.
ILL_DEFINED = {
    "linear": (LINEAR_ILL_DEFINED,),
    "linear_backward": (LINEAR_BACKWARD_ILL_DEFINED,),
    "batch_norm_backward": (BATCH_NORM_BACKWARD_ILL_DEFINED,),
}


def write_all(folder: str, seed: int = 0) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    paths = []
    for k, (op, fn) in enumerate(FIXTURES.items()):
        path = os.path.join(folder, f"{op}.gguf")
        fn(path, np.random.default_rng(seed + k))
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in write_all(sys.argv[1] if len(sys.argv) > 1 else "build/gguf/upstream"):
        print(p)
