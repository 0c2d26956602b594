"""Memory aliasing at calculate and validation of hand-built tensor descriptors.

An output may share memory with an input only as an in-place pair the operator declares, with
the identical layout (address, shape, strides, element size), and is then correct at every size;
any other overlap of an output with an input or another output is BAD_TENSOR_STRIDES naming both.
Every way of making a tensor descriptor validates its arguments.
"""

import ctypes

import ml_dtypes
import numpy as np
import pytest
from conftest import requires_gpu

import infiniop_py as iop
from infiniop_py import DType, Status

F32 = DType.F32


def td(shape, strides=None, dtype=F32):
    return iop.create_tensor_descriptor(shape, strides, dtype)


def status_of(ei) -> Status:
    return ei.value.status


def refused(d, *args, names=(), ws=None):
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(ws, *args)
    assert status_of(ei) is Status.BAD_TENSOR_STRIDES, str(ei.value)
    for n in names:
        assert f"'{n}'" in str(ei.value), str(ei.value)
    return str(ei.value)


@pytest.fixture
def rng():
    return np.random.default_rng(15)


# -- overlaps that are refused ------------------------------------------------------------------


def test_add_output_on_transposed_input_is_refused(cpu_handle, rng):
    n = 1024
    d = iop.create_descriptor("add", cpu_handle, td((n, n), (1, n)), td((n, n)), td((n, n)))
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    keep = a.copy()
    refused(d, a, a, b, names=("c", "a"))
    np.testing.assert_array_equal(a, keep)  # nothing was written
    refused(d, b, a, b, names=("c", "b"))


def test_softmax_output_over_transposed_input_is_refused(cpu_handle, rng):
    n = 700
    d = iop.create_descriptor("softmax", cpu_handle, td((n, n), (1, n)), td((n, n)), dim=-1)
    x = rng.standard_normal((n, n)).astype(np.float32)
    ws = np.empty(max(d.workspace_size, 1), np.uint8)
    refused(d, x, x, ws=ws, names=("output", "input"))


def test_cast_in_place_with_different_element_sizes_is_refused(cpu_handle, rng):
    """An in-place pair the operator declares, but F16 -> F32 at one address: each output
    element overwrites two inputs not yet read. ops.md allows in place only for identical
    dtypes (here: element sizes), so it is refused."""
    n = 700_000
    d = iop.create_descriptor("cast", cpu_handle, td((n,), None, F32), td((n,), None, DType.F16))
    buf = np.zeros(n, np.float32)
    buf.view(np.float16)[:n] = rng.standard_normal(n).astype(np.float16)
    keep = buf.copy()
    msg = refused(d, buf, buf, names=("output", "input"))
    assert "element size" in msg
    np.testing.assert_array_equal(buf, keep)


def test_batch_norm_running_mean_and_var_in_one_buffer_is_refused(cpu_handle, rng):
    d = iop.create_descriptor("batch_norm", cpu_handle, td((4, 3, 8)), td((3,)), td((3,)), td((4, 3, 8)), td((3,)), td((3,)))
    x = rng.standard_normal((4, 3, 8)).astype(np.float32)
    out = np.empty_like(x)
    stats = np.zeros(3, np.float32)
    w, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    ws = np.empty(max(d.workspace_size, 1), np.uint8)
    msg = refused(d, out, stats, stats, x, w, b, ws=ws, names=("running_mean", "running_var"))
    assert "two outputs" in msg


@pytest.mark.parametrize("shift", [1, -1, 5])
def test_partial_overlap_by_an_offset_is_refused(cpu_handle, shift):
    d = iop.create_descriptor("add", cpu_handle, td((8, 8)), td((8, 8)), td((8, 8)))
    buf = np.ones(80, np.float32)
    a = buf[8 : 8 + 64]
    c = buf[8 + shift : 8 + shift + 64]
    refused(d, c, a, np.ones(64, np.float32), names=("c", "a"))
    # the same overlap through raw addresses: the descriptor alone defines the span
    refused(d, c.ctypes.data, a.ctypes.data, np.ones(64, np.float32), names=("c", "a"))


def test_undeclared_pair_at_the_same_layout_is_refused(cpu_handle):
    """clip may work in place on x only; gelu_backward on grad_output only."""
    d = iop.create_descriptor("clip", cpu_handle, td((4, 5)), td((4, 5)), td((4, 5)), td((4, 5)))
    x, lo, hi = np.ones((4, 5), np.float32), np.zeros((4, 5), np.float32), np.full((4, 5), 2, np.float32)
    msg = refused(d, lo, x, lo, hi, names=("y", "min_val"))
    assert "no in-place pair" in msg
    d.calculate(None, x, x, lo, hi)  # the declared pair works
    g = iop.create_descriptor("gelu_backward", cpu_handle, td((4, 5)), td((4, 5)), td((4, 5)))
    refused(g, x, x, lo, names=("grad_input", "input"))
    g.calculate(None, lo, x, lo)


def test_declared_pair_with_another_layout_is_refused(cpu_handle):
    d = iop.create_descriptor("relu", cpu_handle, td((6, 4), (8, 1)), td((6, 4), (4, 1)))
    buf = np.ones(48, np.float32)
    msg = refused(d, buf, buf, names=("output", "input"))
    assert "same address, shape and strides" in msg


def test_torch_and_interface_buffers_are_checked(cpu_handle):
    torch = pytest.importorskip("torch")
    d = iop.create_descriptor("add", cpu_handle, td((4, 4), (1, 4)), td((4, 4)), td((4, 4)))
    a = torch.ones(4, 4)
    refused(d, a, a, torch.ones(4, 4), names=("c", "a"))

    class Iface:
        def __init__(self, arr):
            self.arr = arr
            self.__array_interface__ = arr.__array_interface__

    n = np.ones((4, 4), np.float32)
    refused(d, Iface(n), n, n, names=("c", "a"))


# -- overlaps that are fine -----------------------------------------------------------------------


def test_inputs_may_alias_each_other(cpu_handle, rng):
    d = iop.create_descriptor("add", cpu_handle, td((63,)), td((63,)), td((63,)))
    buf = rng.standard_normal(64).astype(np.float32)
    c = np.empty(63, np.float32)
    d.calculate(None, c, buf[:63], buf[1:])
    np.testing.assert_array_equal(c, buf[:63] + buf[1:])
    d.calculate(None, c, buf[:63], buf[:63])
    np.testing.assert_array_equal(c, buf[:63] * 2)


def test_interleaved_disjoint_tensors_are_accepted(cpu_handle, rng):
    """Spans that meet but bytes that do not: the even and odd columns of one buffer."""
    d = iop.create_descriptor("add", cpu_handle, td((5, 6), (12, 2)), td((5, 6), (12, 2)), td((5, 6)))
    buf = rng.standard_normal((5, 12)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    a = buf[:, 1::2].copy()
    d.calculate(None, buf, buf[:, 1:], b)  # c: even columns, a: odd columns
    np.testing.assert_array_equal(buf[:, 0::2], a + b)
    np.testing.assert_array_equal(buf[:, 1::2], a)
    flat = np.zeros(80, np.float32)
    refused(d, flat[2:], flat, b, names=("c", "a"))  # the same columns, one column apart
    d.calculate(None, flat[1:], flat, b)  # even and odd columns again, from a flat buffer


def test_two_outputs_interleaved_in_one_buffer(cpu_handle, rng):
    """layer_norm's output and input_standardization as the even and odd columns of one matrix."""
    rows, dim = 6, 32
    descs = dict(
        output=td((rows, dim), (2 * dim, 2)),
        input_standardization=td((rows, dim), (2 * dim, 2)),
        input_std_deviation=td((rows,)),
        input=td((rows, dim)),
        weight=td((dim,)),
        bias=td((dim,)),
    )
    d = iop.create_descriptor("layer_norm", cpu_handle, **descs)
    x = rng.standard_normal((rows, dim)).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    b = rng.standard_normal(dim).astype(np.float32)
    ws = np.empty(max(d.workspace_size, 1), np.uint8)
    both = np.empty((rows, 2 * dim), np.float32)
    std = np.empty(rows, np.float32)
    d.calculate(ws, both, both[:, 1:], std, x, w, b)
    out = np.empty((rows, dim), np.float32)
    hat = np.empty((rows, dim), np.float32)
    plain = iop.create_descriptor(
        "layer_norm", cpu_handle, td((rows, dim)), td((rows, dim)), td((rows,)), td((rows, dim)), td((dim,)), td((dim,))
    )
    plain.calculate(np.empty(max(plain.workspace_size, 1), np.uint8), out, hat, np.empty(rows, np.float32), x, w, b)
    np.testing.assert_array_equal(both[:, 0::2], out)
    np.testing.assert_array_equal(both[:, 1::2], hat)
    refused(d, both, both, std, x, w, b, ws=ws, names=("output", "input_standardization"))


def test_empty_tensors_never_overlap(cpu_handle):
    d = iop.create_descriptor("add", cpu_handle, td((0, 4)), td((0, 4)), td((0, 4)))
    buf = np.ones(4, np.float32)
    d.calculate(None, buf, buf, buf)


# -- in place with the identical layout is correct at every size ---------------------------------


def _pair(d, out_name, in_name, bufs, ws=None):
    """Run ``d`` out of place and in place (out_name on in_name's buffer); both results."""
    names = [t.name for t in d.spec.tensors]
    first = {n: b.copy() for n, b in bufs.items()}
    first[out_name] = np.empty_like(bufs[in_name])
    d.calculate(ws, *(first[n] for n in names))
    second = {n: b.copy() for n, b in bufs.items()}
    second[out_name] = second[in_name]
    d.calculate(ws, *(second[n] for n in names))
    return first[out_name], second[in_name]


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("target", ["a", "b"])
def test_in_place_identical_layouts_are_correct_at_every_size(cpu_handle, rng, op, target):
    n = 1024  # above the CPU thread pool's chunking threshold
    d = iop.create_descriptor(op, cpu_handle, td((n, n)), td((n, n)), td((n, n)))
    bufs = {k: rng.standard_normal((n, n)).astype(np.float32) for k in ("a", "b")}
    want, got = _pair(d, "c", target, bufs)
    np.testing.assert_array_equal(got, want)


def test_in_place_transposed_identical_layouts(cpu_handle, rng):
    n = 1024
    t = td((n, n), (1, n))
    d = iop.create_descriptor("add", cpu_handle, t, t, td((n, n)))
    bufs = {"a": rng.standard_normal((n, n)).astype(np.float32), "b": rng.standard_normal((n, n)).astype(np.float32)}
    want, got = _pair(d, "c", "a", bufs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_in_place_700(cpu_handle, rng, dim):
    n = 700
    d = iop.create_descriptor("softmax", cpu_handle, td((n, n)), td((n, n)), dim=dim)
    ws = np.empty(max(d.workspace_size, 1), np.uint8)
    want, got = _pair(d, "output", "input", {"input": rng.standard_normal((n, n)).astype(np.float32)}, ws)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "src,dst",
    [(np.float32, np.int32), (np.float16, ml_dtypes.bfloat16), (np.int64, np.float64), (np.uint8, np.bool_)],
)
def test_cast_in_place_same_element_size(cpu_handle, rng, src, dst):
    n = 700_000
    d = iop.create_descriptor("cast", cpu_handle, td((n,), None, dst), td((n,), None, src))
    x = (rng.standard_normal(n) * 100).astype(src)
    out = np.empty(n, dst)
    d.calculate(None, out, x)
    buf = x.copy()
    d.calculate(None, buf.view(dst), buf)
    np.testing.assert_array_equal(buf.view(dst), out)


# -- hand-built tensor descriptors --------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,strides,dtype,status",
    [
        ((2, 2), (2**40, -(2**40)), F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), (4, -1), F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), (1,), F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), (2, 1, 1), F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), (2.0, 1), F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), (True, 1), F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), 5, F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), "ab", F32, Status.BAD_TENSOR_STRIDES),
        ((2, 2), (2**62, 1), F32, Status.BAD_TENSOR_STRIDES),  # span beyond 2^63 bytes
        ((1, 2), (2**62, 1), F32, Status.BAD_TENSOR_STRIDES),  # a stride beyond 2^63 bytes
        ((2, 2), (2**64, 1), F32, Status.BAD_TENSOR_STRIDES),
        ((2, -2), None, F32, Status.BAD_TENSOR_SHAPE),
        ((2, 2.5), None, F32, Status.BAD_TENSOR_SHAPE),
        (5, None, F32, Status.BAD_TENSOR_SHAPE),
        (None, None, F32, Status.BAD_TENSOR_SHAPE),
        ((2**40, 2**40), None, F32, Status.BAD_TENSOR_SHAPE),
        ((2**64,), None, F32, Status.BAD_TENSOR_SHAPE),
        ((2, 2), None, None, Status.BAD_TENSOR_DTYPE),
        ((2, 2), None, DType.INVALID, Status.BAD_TENSOR_DTYPE),
        ((2, 2), None, "bogus", Status.BAD_TENSOR_DTYPE),
        ((2, 2), None, object(), Status.BAD_TENSOR_DTYPE),
    ],
)
@pytest.mark.parametrize("maker", ["TensorDescriptor", "create_tensor_descriptor", "infiniopCreateTensorDescriptor"])
def test_every_way_of_making_a_descriptor_validates(maker, shape, strides, dtype, status):
    with pytest.raises(iop.InfiniopError) as ei:
        if maker == "infiniopCreateTensorDescriptor":
            ndim = len(shape) if isinstance(shape, tuple) else 1
            if shape is None:  # C: a null shape pointer for ndim 1
                status = Status.NULL_POINTER
            iop.infiniopCreateTensorDescriptor(ndim, shape, strides, dtype)
        else:
            getattr(iop, maker)(shape, strides, dtype)
    assert status_of(ei) is status, str(ei.value)


@pytest.mark.parametrize(
    "args,status",
    [
        (("x", [2], None, iop.float32), Status.BAD_PARAM),
        ((1.0, [2], None, iop.float32), Status.BAD_PARAM),
        ((True, [2], None, iop.float32), Status.BAD_PARAM),
        ((-1, [], None, iop.float32), Status.BAD_PARAM),
        ((1, 5, None, iop.float32), Status.BAD_TENSOR_SHAPE),
        ((2, [2], None, iop.float32), Status.BAD_TENSOR_SHAPE),
        ((1, [2, 3], None, iop.float32), Status.BAD_TENSOR_SHAPE),
        ((1, None, None, iop.float32), Status.NULL_POINTER),
        ((1, [2], [1, 1], iop.float32), Status.BAD_TENSOR_STRIDES),
        ((1, [2], 1, iop.float32), Status.BAD_TENSOR_STRIDES),
        ((1, [2], None, "f99"), Status.BAD_TENSOR_DTYPE),
    ],
)
def test_c_style_odd_argument_forms(args, status):
    with pytest.raises(iop.InfiniopError) as ei:
        iop.infiniopCreateTensorDescriptor(*args)
    assert status_of(ei) is status, str(ei.value)


def test_descriptor_forms_normalise_to_one_value():
    want = iop.TensorDescriptor((2, 3), (3, 1), F32)
    assert iop.TensorDescriptor([2, 3], None, "f32") == want
    assert iop.TensorDescriptor(np.array([2, 3]), [np.int64(3), 1], np.float32) == want
    assert iop.infiniopCreateTensorDescriptor(np.int32(2), (2, 3), None, 13) == want
    assert iop.infiniopCreateTensorDescriptor(0, None, None, F32).shape == ()
    d = iop.TensorDescriptor([2, 3], [3, 1], "float32")
    assert type(d.shape) is tuple and type(d.strides) is tuple and d.dtype is F32
    assert all(type(v) is int for v in d.shape + d.strides)


def test_huge_strides_exceed_the_buffer(cpu_handle):
    """The segfault of the report: now refused at construction (negative) or at calculate
    (span beyond what the buffer holds: BAD_PARAM, api.md §5), never a crash."""
    for strides in ((2**40, -(2**40)), (4, -1)):  # span 1 and 4 elements: reads far from / before the buffer
        with pytest.raises(iop.InfiniopError) as ei:
            hand = iop.TensorDescriptor((2, 2), strides, F32)
            d = iop.create_descriptor("add", cpu_handle, td((2, 2)), hand, hand)
            d.calculate(None, np.empty(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32))
        assert status_of(ei) is Status.BAD_TENSOR_STRIDES
    big = iop.TensorDescriptor((2, 2), (2**41, 2**40), F32)
    d = iop.create_descriptor("add", cpu_handle, big, big, big)
    c = np.full(4, 7.0, np.float32)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, np.ones(4, np.float32), np.ones(4, np.float32))
    assert status_of(ei) is Status.BAD_PARAM and "'c'" in str(ei.value)
    assert (c == 7.0).all()


def test_buffer_with_negative_strides_must_cover_the_span(cpu_handle):
    """A reversed NumPy view starts at its highest address: the descriptor's span above it is
    not the array's memory, so it is refused instead of read."""
    d = iop.create_descriptor("add", cpu_handle, td((4,)), td((4,)), td((4,)))
    base = np.arange(8, dtype=np.float32)
    rev = base[3::-1]
    c = np.empty(4, np.float32)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, rev, base[:4])
    assert status_of(ei) is Status.BAD_PARAM and "'a'" in str(ei.value)


def test_raw_addresses_are_trusted_for_extent(cpu_handle):
    """A raw int address carries no extent: the caller vouches for the descriptor's span
    (documented); overlap with other buffers is still checked from the addresses."""
    d = iop.create_descriptor("add", cpu_handle, td((2, 3)), td((2, 3)), td((2, 3)))
    raw = (ctypes.c_float * 6)(*range(6))
    c = np.empty((2, 3), np.float32)
    d.calculate(None, c, ctypes.addressof(raw), ctypes.addressof(raw))
    np.testing.assert_array_equal(c, 2 * np.arange(6, dtype=np.float32).reshape(2, 3))
    d.calculate(None, ctypes.addressof(raw), ctypes.addressof(raw), c)  # identical layout: in place
    refused(d, ctypes.addressof(raw) + 4, ctypes.addressof(raw), c, names=("c", "a"))


# -- NVIDIA ---------------------------------------------------------------------------------------


@requires_gpu
@pytest.mark.gpu
def test_gpu_aliasing_rules():
    import cupy as cp

    h = iop.create_handle("nvidia")
    n = 1024
    d = iop.create_descriptor("add", h, td((n, n), (1, n)), td((n, n)), td((n, n)))
    a = cp.random.standard_normal((n, n), dtype=cp.float32)
    b = cp.random.standard_normal((n, n), dtype=cp.float32)
    refused(d, a, a, b, names=("c", "a"))
    m = 700_000
    cast = iop.create_descriptor("cast", h, td((m,), None, F32), td((m,), None, DType.F16))
    buf = cp.zeros(m, cp.float32)
    refused(cast, buf, buf, names=("output", "input"))
    same = iop.create_descriptor("add", h, td((n, n)), td((n, n)), td((n, n)))
    want = a + b
    got = a.copy()
    same.calculate(None, got, got, b)
    cp.cuda.get_current_stream().synchronize()
    assert bool((got == want).all())
    stats = cp.zeros(3, cp.float32)
    bn = iop.create_descriptor("batch_norm", h, td((4, 3, 8)), td((3,)), td((3,)), td((4, 3, 8)), td((3,)), td((3,)))
    ws = cp.empty(max(bn.workspace_size, 1), cp.uint8)
    x = cp.ones((4, 3, 8), cp.float32)
    refused(bn, cp.empty_like(x), stats, stats, x, cp.ones(3, cp.float32), cp.zeros(3, cp.float32), ws=ws)


@requires_gpu
@pytest.mark.gpu
def test_gpu_hand_built_descriptors():
    import cupy as cp

    h = iop.create_handle("nvidia")
    big = iop.TensorDescriptor((2, 2), (2**41, 2**40), F32)
    d = iop.create_descriptor("add", h, big, big, big)
    c = cp.zeros(4, cp.float32)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, cp.ones(4, cp.float32), cp.ones(4, cp.float32))
    assert status_of(ei) is Status.BAD_PARAM
