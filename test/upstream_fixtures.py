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


FIXTURES = {
    "add": write_add,
    "sub": write_sub,
    "mul": write_mul,
    "zeros": write_zeros,
    "ones": write_ones,
    "rearrange": write_rearrange,
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
