"""Framework behaviour: enums, errors, handles, descriptors, lifecycle, buffers, validation."""

import ctypes

import ml_dtypes
import numpy as np
import pytest

import infiniop_py as iop
from infiniop_py import Device, DType, Status
from infiniop_py.descriptor import Descriptor
from infiniop_py.spec import Checker, Info, OpSpec, inp, out


def td(shape, strides=None, dtype=iop.float32):
    return iop.create_tensor_descriptor(shape, strides, dtype)


def status_of(excinfo) -> Status:
    assert isinstance(excinfo.value, iop.InfiniopError)
    return excinfo.value.status


# -- enums and errors ----------------------------------------------------------------------


def test_enum_values_match_upstream():
    assert [s.value for s in Status] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13]
    assert Device.NVIDIA == 1 and Device.ALI == 10 and Device.HYGON == 8
    assert DType.F16 == 12 and DType.BF16 == 19 and DType.BOOL == 2 and DType.F64 == 14 and DType.U64 == 10
    assert iop.bfloat16 is DType.BF16 and iop.bool_ is DType.BOOL and iop.uint64 is DType.U64


def test_error_hierarchy():
    from infiniop_py.status import error

    e = error(Status.BAD_TENSOR_SHAPE, "add: shape")
    assert isinstance(e, iop.BadTensorShape) and isinstance(e, iop.InfiniopError) and isinstance(e, RuntimeError)
    assert e.status is Status.BAD_TENSOR_SHAPE and "BAD_TENSOR_SHAPE" in str(e)


# -- handles ---------------------------------------------------------------------------------


def test_handles():
    h = iop.create_handle("cpu")
    assert h.device is Device.CPU
    assert iop.create_handle(Device.CPU).device is Device.CPU
    assert iop.infiniopCreateHandle(device=0, device_id=0).device is Device.CPU
    iop.destroy_handle(h)
    with pytest.raises(iop.InfiniopError) as ei:
        iop.destroy_handle(h)
    assert status_of(ei) is Status.BAD_PARAM
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor("add", h, td((2,)), td((2,)), td((2,)))
    assert status_of(ei) is Status.BAD_PARAM


@pytest.mark.parametrize("name", ["ascend", Device.KUNLUN, "nosuchdevice", 99])
def test_unsupported_devices(name):
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_handle(name)
    assert status_of(ei) is Status.DEVICE_TYPE_NOT_SUPPORTED


def test_nvidia_handle_without_gpu_or_bad_id():
    from conftest import gpu_available

    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_handle("nvidia:64")
    assert status_of(ei) is Status.DEVICE_NOT_FOUND
    assert "not available" in str(ei.value)
    if not gpu_available():
        with pytest.raises(iop.InfiniopError):
            iop.create_handle("nvidia")


# -- tensor descriptors ---------------------------------------------------------------------


def test_tensor_descriptor_values():
    d = td((4, 5))
    assert d.strides == (5, 1) and d.numel == 20 and d.span == 20 and d.ndim == 2
    z = td(())
    assert z.shape == () and z.numel == 1 and z.span == 1
    e = td((0, 3))
    assert e.numel == 0 and e.span == 0
    with pytest.raises(AttributeError):
        d.shape = (1,)  # frozen value
    c = iop.infiniopCreateTensorDescriptor(2, [3, 4], [1, 3], DType.F16)
    assert c.shape == (3, 4) and c.strides == (1, 3) and c.dtype is DType.F16
    assert iop.create_tensor_descriptor((2,), None, "bfloat16").dtype is DType.BF16
    assert iop.create_tensor_descriptor((2,), None, np.float16).dtype is DType.F16
    assert iop.create_tensor_descriptor((2,), None, ml_dtypes.bfloat16).dtype is DType.BF16


@pytest.mark.parametrize(
    "shape,strides,dtype,status",
    [
        ((4, 5), (1,), iop.float32, Status.BAD_TENSOR_STRIDES),
        ((4, 5), (5, -1), iop.float32, Status.BAD_TENSOR_STRIDES),
        ((4, -5), None, iop.float32, Status.BAD_TENSOR_SHAPE),
        ((4, 5.0), None, iop.float32, Status.BAD_TENSOR_SHAPE),
        ((4,), None, "complex256", Status.BAD_TENSOR_DTYPE),
        ((4,), None, DType.INVALID, Status.BAD_TENSOR_DTYPE),
    ],
)
def test_tensor_descriptor_errors(shape, strides, dtype, status):
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_tensor_descriptor(shape, strides, dtype)
    assert status_of(ei) is status


# -- lifecycle ------------------------------------------------------------------------------


def test_lifecycle_generic_and_c_style(cpu_handle):
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    c = np.full_like(a, np.nan)
    d = iop.create_descriptor("add", cpu_handle, td((3, 4)), td((3, 4)), td((3, 4)))
    assert d.workspace_size == 0
    d.calculate(None, c, a, b)
    np.testing.assert_array_equal(c, a + b)
    d.calculate(None, c=c, a=b, b=b)
    np.testing.assert_array_equal(c, b + b)
    d.destroy()
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, a, b)
    assert status_of(ei) is Status.BAD_PARAM
    with pytest.raises(iop.InfiniopError) as ei:
        d.destroy()
    assert status_of(ei) is Status.BAD_PARAM

    cd = iop.infiniopCreateSubDescriptor(cpu_handle, td((3, 4)), td((3, 4)), td((3, 4)))
    assert iop.infiniopGetSubWorkspaceSize(cd) == 0
    iop.infiniopSub(cd, None, 0, c, a, b, None)
    np.testing.assert_array_equal(c, a - b)
    with pytest.raises(iop.InfiniopError) as ei:
        iop.infiniopAdd(cd, None, 0, c, a, b, None)  # descriptor of another op
    assert status_of(ei) is Status.BAD_PARAM
    iop.infiniopDestroySubDescriptor(cd)
    with iop.create_descriptor("mul", cpu_handle, c=td((3, 4)), a=td((3, 4)), b=td((3, 4))) as md:
        md.calculate(None, c, a, b)
    np.testing.assert_array_equal(c, a * b)
    assert md._destroyed


def test_c_style_names_cover_registry():
    names = dir(iop)
    for op in iop.list_ops():
        stem = iop.op_info(op)["stem"]
        for fn in (f"infiniopCreate{stem}Descriptor", f"infiniop{stem}", f"infiniopDestroy{stem}Descriptor"):
            assert fn in names and callable(getattr(iop, fn))
    assert not hasattr(iop, "infiniopGetRearrangeWorkspaceSize")  # rearrange has no workspace API
    with pytest.raises(AttributeError):
        iop.infiniopCreateNoSuchOpDescriptor  # noqa: B018


# -- validation at create -------------------------------------------------------------------


@pytest.mark.parametrize(
    "op,descs,status,needle",
    [
        ("add", [td((3, 4)), td((3, 4)), td((3, 4), dtype=iop.float16)], Status.BAD_TENSOR_DTYPE, "'b'"),
        ("add", [td((3, 4)), td((3, 5)), td((3, 4))], Status.BAD_TENSOR_SHAPE, "'a'"),
        ("add", [td((3, 4)), td((12,)), td((3, 4))], Status.BAD_TENSOR_SHAPE, "'a'"),
        ("add", [td((3, 4), (0, 1)), td((3, 4)), td((3, 4))], Status.BAD_TENSOR_STRIDES, "'c'"),
        ("add", [td((4, 4), (1, 1)), td((4, 4)), td((4, 4))], Status.BAD_TENSOR_STRIDES, "overlaps"),
        ("add", [td((2,), dtype=iop.uint32)] * 3, Status.BAD_TENSOR_DTYPE, "U32"),
        ("div", [td((2,), dtype=iop.int32)] * 3, Status.BAD_TENSOR_DTYPE, "I32"),
        ("zeros", [td((2, 3), dtype=iop.bool_), td((3, 2))], Status.BAD_TENSOR_SHAPE, "'x'"),
        ("rearrange", [td((2, 3)), td((2, 3), dtype=iop.int32)], Status.BAD_TENSOR_DTYPE, "'src'"),
        ("rearrange", [td((2, 3), (0, 1)), td((2, 3))], Status.BAD_TENSOR_STRIDES, "'dst'"),
    ],
)
def test_create_rejects(cpu_handle, op, descs, status, needle):
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor(op, cpu_handle, *descs)
    assert status_of(ei) is status
    assert op in str(ei.value) and needle in str(ei.value)


def test_create_argument_errors(cpu_handle):
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor("nosuchop", cpu_handle)
    assert status_of(ei) is Status.BAD_PARAM
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor("add", cpu_handle, td((2,)), td((2,)))
    assert status_of(ei) is Status.NULL_POINTER
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor("add", cpu_handle, td((2,)), td((2,)), td((2,)), bogus=1)
    assert status_of(ei) is Status.BAD_PARAM
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor("add", cpu_handle, td((2,)), td((2,)), "not a descriptor")
    assert status_of(ei) is Status.BAD_PARAM
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor("add", "not a handle", td((2,)), td((2,)), td((2,)))
    assert status_of(ei) is Status.BAD_PARAM


# -- calculate-time checks and buffers ---------------------------------------------------------


def test_buffer_too_small_leaves_output_untouched(cpu_handle):
    d = iop.create_descriptor("add", cpu_handle, td((4, 4)), td((4, 4)), td((4, 4)))
    a = np.ones((4, 4), np.float32)
    c = np.full(16, 7.0, np.float32)
    small = np.ones(15, np.float32)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, small, a)
    assert status_of(ei) is Status.BAD_PARAM and "'a'" in str(ei.value)
    assert (c == 7.0).all()
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, None, a, a)
    assert status_of(ei) is Status.NULL_POINTER
    ro = np.full((4, 4), 7.0, np.float32)
    ro.flags.writeable = False
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, ro, a, a)
    assert status_of(ei) is Status.BAD_PARAM and (ro == 7.0).all()
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, a, object())
    assert status_of(ei) is Status.BAD_PARAM
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, a, a, a)
    assert status_of(ei) is Status.BAD_PARAM


def test_wrong_device_buffer(cpu_handle):
    torch = pytest.importorskip("torch")
    d = iop.create_descriptor("add", cpu_handle, td((4,)), td((4,)), td((4,)))
    meta = torch.empty(4, device="meta")
    c = np.zeros(4, np.float32)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, meta, c)
    assert status_of(ei) is Status.BAD_PARAM


def test_buffer_kinds_cpu(cpu_handle):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    want = a + b
    d = iop.create_descriptor("add", cpu_handle, td((5, 6)), td((5, 6)), td((5, 6)))

    class Iface:  # only __array_interface__
        def __init__(self, arr):
            self.arr = arr
            self.__array_interface__ = arr.__array_interface__

    class DL:  # only DLPack
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    c1 = np.empty_like(a)
    d.calculate(None, c1, torch.from_numpy(a), Iface(b))
    np.testing.assert_array_equal(c1, want)
    c2 = torch.empty(5, 6)
    d.calculate(None, c2, a.ctypes.data, DL(torch.from_numpy(b)))
    np.testing.assert_array_equal(c2.numpy(), want)
    raw = (ctypes.c_float * 30)()
    d.calculate(None, ctypes.addressof(raw), a, b)
    np.testing.assert_array_equal(np.frombuffer(raw, np.float32).reshape(5, 6), want)


def test_strided_buffers_and_bf16(cpu_handle):
    rng = np.random.default_rng(4)
    base = rng.standard_normal((6, 10)).astype(ml_dtypes.bfloat16)
    a = base[:, ::2]  # strides (10, 2) in elements
    b = rng.standard_normal((6, 5)).astype(ml_dtypes.bfloat16)
    c = np.zeros((5, 6), ml_dtypes.bfloat16).T  # column-major view
    d = iop.create_descriptor(
        "add", cpu_handle, td((6, 5), (1, 6), iop.bfloat16), td((6, 5), (10, 2), iop.bfloat16), td((6, 5), None, iop.bfloat16)
    )
    d.calculate(None, c, a, b)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(c.astype(np.float32), want.astype(np.float32))


def test_empty_and_0d(cpu_handle):
    d = iop.create_descriptor("add", cpu_handle, td((0, 3)), td((0, 3)), td((0, 3)))
    d.calculate(None, None, None, None)  # nothing to touch
    z = iop.create_descriptor("mul", cpu_handle, td(()), td(()), td(()))
    c = np.array(np.nan, np.float32)
    z.calculate(None, c, np.array(3.0, np.float32), np.array(2.0, np.float32))
    assert c[()] == 6.0


# -- workspace ----------------------------------------------------------------------------------


def _ws_spec() -> OpSpec:
    def validate(check: Checker) -> Info:
        return Info(check.op, check.tensors, check.attrs)

    def cpu(info):
        def run(views, ws, rt):
            ws[:] = 1  # the operator may clobber its workspace
            views["y"][...] = views["x"]

        run.workspace_size = 64
        return run

    return OpSpec(
        name="wsop", stem="WsOp", tensors=(out("y"), inp("x")), validate=validate, dtypes=frozenset({DType.F32}), cpu=cpu
    )


def test_workspace_checks(cpu_handle):
    d = Descriptor(_ws_spec(), cpu_handle, {"y": td((4,)), "x": td((4,))}, {})
    assert d.workspace_size == 64
    x = np.arange(4, dtype=np.float32)
    y = np.full(4, -1.0, np.float32)
    for ws, size in [(None, None), (np.zeros(63, np.uint8), None), (np.zeros(64, np.uint8), 32)]:
        with pytest.raises(iop.InfiniopError) as ei:
            d.calculate(ws, y, x, workspace_size=size)
        assert status_of(ei) is Status.INSUFFICIENT_WORKSPACE
        assert (y == -1).all()
    d.calculate(np.zeros(64, np.uint8), y, x)
    np.testing.assert_array_equal(y, x)


# -- pythonic layer -------------------------------------------------------------------------------


def test_ops_convenience():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 7)).astype(np.float32)
    b = rng.standard_normal((4, 7)).astype(np.float32)
    np.testing.assert_array_equal(iop.ops.add(a, b), a + b)
    np.testing.assert_array_equal(iop.ops.div(a, b), a / b)
    np.testing.assert_array_equal(iop.ops.rearrange(a.T), a.T)
    np.testing.assert_array_equal(iop.ops.ones(a), np.ones_like(a))
    o = np.empty_like(a)
    assert iop.ops.sub(a, b, out=o) is o
    np.testing.assert_array_equal(o, a - b)
    assert "add" in dir(iop.ops)


def test_cpu_chunked_paths_match_reference(cpu_handle):
    """Large tensors take the threaded chunked CPU path (and rearrange its slab transpose)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((700, 1000)).astype(np.float32)
    b = rng.standard_normal((1000, 700)).astype(np.float16)
    c = np.full((700, 1000), np.nan, np.float16)
    d = iop.create_descriptor(
        "add",
        cpu_handle,
        td((700, 1000), None, iop.float16),
        td((700, 1000), None, iop.float16),
        td((700, 1000), (1, 700), iop.float16),
    )
    d.calculate(None, c, a.astype(np.float16), b)
    want = (a.astype(np.float16).astype(np.float32) + b.T.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(c, want)
    r = iop.create_descriptor("rearrange", cpu_handle, td((700, 1000)), td((700, 1000), (1, 700)))
    out = np.full((700, 1000), np.nan, np.float32)
    r.calculate(None, out, np.ascontiguousarray(a.T))
    np.testing.assert_array_equal(out, a)


def test_keyword_tensor_order_is_canonical(cpu_handle):
    """Descriptors created with keyword tensors in any order keep the spec's order (backends
    index pointers by it; the NVIDIA kernels once wrote into the input when this was wrong)."""
    d = iop.create_descriptor("sub", cpu_handle, b=td((3,)), a=td((3,)), c=td((3,)))
    assert list(d.info.tensors) == ["c", "a", "b"]
    c = np.zeros(3, np.float32)
    d.calculate(None, b=np.ones(3, np.float32), c=c, a=np.full(3, 5.0, np.float32))
    np.testing.assert_array_equal(c, [4.0, 4.0, 4.0])


def test_buffer_cache_revalidates_torch_tensors(cpu_handle):
    """A torch tensor re-pointed in place (set_) between calls is checked again, not reused."""
    torch = pytest.importorskip("torch")
    d = iop.create_descriptor("add", cpu_handle, td((4,)), td((4,)), td((4,)))
    a, b, c = torch.ones(4), torch.ones(4), torch.zeros(4)
    d.calculate(None, c, a, b)
    a.set_(torch.full((4,), 3.0).untyped_storage())
    d.calculate(None, c, a, b)
    assert c.tolist() == [4.0] * 4
    a.set_(torch.full((2,), 3.0).untyped_storage(), 0, (2,), (1,))
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, c, a, b)
    assert ei.value.status is Status.BAD_PARAM


def test_a_misspelt_attribute_is_bad_param_not_ignored():
    """A keyword that is neither a tensor nor an attribute of the operator (``dim`` for ``dims``)
    is BAD_PARAM naming it, through create_descriptor and through iop.ops, never a TypeError
    and never silently the default."""
    x = np.ones((4, 3), np.float32)
    f32 = iop.float32
    with pytest.raises(iop.InfiniopError) as ei:
        iop.ops.sum(x, dim=[-1])
    assert status_of(ei) is Status.BAD_PARAM and "'dim'" in str(ei.value) and "dims" in str(ei.value)
    with pytest.raises(iop.InfiniopError) as ei:
        iop.create_descriptor(
            "sum",
            iop.create_handle("cpu"),
            output=iop.create_tensor_descriptor((4,), None, f32),
            input=iop.create_tensor_descriptor((4, 3), None, f32),
            dim=[1],
        )
    assert status_of(ei) is Status.BAD_PARAM
    np.testing.assert_array_equal(iop.ops.sum(x, dims=[-1]), np.full(4, 3.0, np.float32))
