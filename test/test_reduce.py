"""Bad input and API details of the reduction / row-wise family (the generic cases live in test_ops)."""

import numpy as np
import pytest

import infiniop_py as iop
from infiniop_py import Status

D = iop.create_tensor_descriptor


@pytest.fixture
def h():
    return iop.create_handle("cpu")


def status_of(fn):
    with pytest.raises(iop.InfiniopError) as e:
        fn()
    return e.value.status


def test_sum_dims_checks(h):
    x = D((4, 5, 6), None, iop.float32)
    assert status_of(lambda: iop.create_descriptor("sum", h, D((4,), None, iop.float32), x, dims=[1, 1])) == Status.BAD_PARAM
    assert status_of(lambda: iop.create_descriptor("sum", h, D((4,), None, iop.float32), x, dims=[3])) == Status.BAD_PARAM
    assert (
        status_of(lambda: iop.create_descriptor("sum", h, D((4, 6), None, iop.float32), x, dims=[1], keepdim=True))
        == Status.BAD_TENSOR_SHAPE
    )
    assert (
        status_of(lambda: iop.create_descriptor("sum", h, D((4, 6), None, iop.float16), x, dims=[1])) == Status.BAD_TENSOR_DTYPE
    )
    assert (
        status_of(lambda: iop.create_descriptor("sum", h, D((4, 6), (0, 1), iop.float32), x, dims=[1]))
        == Status.BAD_TENSOR_STRIDES
    )
    assert (
        status_of(lambda: iop.create_descriptor("sum", h, D((), None, iop.int32), D((3,), None, iop.int32)))
        == Status.BAD_TENSOR_DTYPE
    )


def test_sum_negative_dims_and_all(h):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = iop.create_descriptor("sum", h, D((2, 4), None, iop.float32), D(x.shape, None, iop.float32), dims=[-2])
    y = np.empty((2, 4), np.float32)
    d.calculate(None, y, x)
    np.testing.assert_array_equal(y, x.sum(1))
    d2 = iop.create_descriptor("sum", h, D((), None, iop.float32), D(x.shape, None, iop.float32), dims=[])
    y0 = np.empty((), np.float32)
    d2.calculate(None, y0, x)
    assert y0 == x.sum()


def test_sum_cstyle_repeats_dims(h):
    x = np.ones((3, 5), np.float32)
    xd, yd = D((3, 5), None, iop.float32), D((3, 1), None, iop.float32)
    d = iop.infiniopCreateSumDescriptor(h, yd, xd, [1], 1, True)
    y = np.empty((3, 1), np.float32)
    iop.infiniopSum(d, None, 0, y, x, [1], 1, True, None)
    np.testing.assert_array_equal(y, 5.0)
    assert status_of(lambda: iop.infiniopSum(d, None, 0, y, x, [0], 1, True, None)) == Status.BAD_PARAM
    assert status_of(lambda: iop.infiniopSum(d, None, 0, y, x, [1], 1, False, None)) == Status.BAD_PARAM
    assert status_of(lambda: iop.infiniopCreateSumDescriptor(h, yd, xd, [1], 2, True)) == Status.BAD_PARAM
    iop.infiniopDestroySumDescriptor(d)


def test_reduce_max_mean_checks(h):
    x = D((4, 5), None, iop.float32)
    assert status_of(lambda: iop.create_descriptor("reduce_max", h, D((4,), None, iop.float32), x, dim=2)) == Status.BAD_PARAM
    assert (
        status_of(lambda: iop.create_descriptor("reduce_mean", h, D((4, 5), None, iop.float32), x, dim=1))
        == Status.BAD_TENSOR_SHAPE
    )
    assert (
        status_of(lambda: iop.create_descriptor("reduce_max", h, D((4,), None, iop.float32), D((4, 0), None, iop.float32), dim=1))
        == Status.BAD_TENSOR_SHAPE
    )
    assert (
        status_of(lambda: iop.create_descriptor("reduce_mean", h, D((4,), None, iop.int32), D((4, 5), None, iop.int32), dim=1))
        == Status.BAD_TENSOR_DTYPE
    )
    iop.create_descriptor("reduce_max", h, D((4,), None, iop.int32), D((4, 5), None, iop.int32), dim=1).destroy()


def test_mean_of_empty_extent_is_nan(h):
    d = iop.create_descriptor("reduce_mean", h, D((3,), None, iop.float32), D((3, 0), None, iop.float32), dim=1)
    y = np.zeros(3, np.float32)
    d.calculate(None, y, np.empty((3, 0), np.float32))
    assert np.isnan(y).all()


def test_softmax_checks(h):
    x = D((4, 5), None, iop.float32)
    assert status_of(lambda: iop.create_descriptor("softmax", h, x, x, dim=2)) == Status.BAD_PARAM
    assert status_of(lambda: iop.create_descriptor("log_softmax", h, D((4, 6), None, iop.float32), x)) == Status.BAD_TENSOR_SHAPE
    assert (
        status_of(lambda: iop.create_descriptor("softmax", h, D((), None, iop.float32), D((), None, iop.float32)))
        == Status.BAD_TENSOR_SHAPE
    )
    assert status_of(lambda: iop.create_descriptor("softmax", h, D((4, 5), (1, 0), iop.float32), x)) == Status.BAD_TENSOR_STRIDES


def test_softmax_all_neg_inf_row_is_nan(h):
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]], np.float32)
    y = np.empty_like(x)
    iop.create_descriptor("softmax", h, D((2, 2)), D((2, 2))).calculate(None, y, x)
    assert np.isnan(y[0]).all() and y[1].tolist() == [1.0, 0.0]


def test_causal_softmax_checks(h):
    assert status_of(lambda: iop.create_descriptor("causal_softmax", h, D((5, 4)), D((5, 4)))) == Status.BAD_TENSOR_SHAPE
    assert status_of(lambda: iop.create_descriptor("causal_softmax", h, D((5,)), D((5,)))) == Status.BAD_TENSOR_SHAPE
    x = np.zeros((2, 4), np.float32)
    y = np.empty_like(x)
    iop.create_descriptor("causal_softmax", h, D((2, 4)), D((2, 4))).calculate(None, y, x)
    np.testing.assert_allclose(y, [[1 / 3, 1 / 3, 1 / 3, 0], [0.25] * 4])


def test_cross_entropy_checks_and_bad_labels(h):
    x = D((4, 5), None, iop.float32)
    assert (
        status_of(lambda: iop.create_descriptor("cross_entropy", h, D((4,)), x, D((4,), None, iop.float32)))
        == Status.BAD_TENSOR_DTYPE
    )
    assert (
        status_of(lambda: iop.create_descriptor("cross_entropy", h, D((5,)), x, D((5,), None, iop.int64)))
        == Status.BAD_TENSOR_SHAPE
    )
    d = iop.create_descriptor("cross_entropy", h, D((4,)), x, D((4,), None, iop.int32))
    y = np.empty(4, np.float32)
    d.calculate(None, y, np.zeros((4, 5), np.float32), np.array([0, -100, 5, 2**31 - 1], np.int32))
    np.testing.assert_allclose(y, [np.log(5), 0, 0, 0], rtol=1e-6)


def test_cross_entropy_loss_checks(h):
    x = D((4, 5), None, iop.float32)
    assert (
        status_of(lambda: iop.create_descriptor("cross_entropy_loss", h, D((2,)), x, D((4,), None, iop.int64)))
        == Status.BAD_TENSOR_SHAPE
    )
    assert (
        status_of(lambda: iop.create_descriptor("cross_entropy_loss", h, D(()), x, D((5,), None, iop.int64)))
        == Status.BAD_TENSOR_SHAPE
    )
    d = iop.create_descriptor("cross_entropy_loss", h, D(()), x, D((4,), None, iop.int64))
    loss = np.empty((), np.float32)
    d.calculate(
        d.workspace_size and np.empty(d.workspace_size, np.uint8), loss, np.zeros((4, 5), np.float32), np.array([1, -100, 9, 2])
    )
    np.testing.assert_allclose(loss, np.log(5), rtol=1e-6)


def test_cross_entropy_loss_backward_checks(h):
    x = D((4, 5), None, iop.float32)
    assert (
        status_of(lambda: iop.create_descriptor("cross_entropy_loss_backward", h, x, x, D((4, 5), None, iop.float16)))
        == Status.BAD_TENSOR_DTYPE
    )
    assert (
        status_of(lambda: iop.create_descriptor("cross_entropy_loss_backward", h, D((4, 5), (0, 1)), x, x))
        == Status.BAD_TENSOR_STRIDES
    )


def test_reduce_plan_kinds():
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce import plan_reduce

    full = plan_reduce((8192, 8192), (8192, 1), (0, 0), (0, 1), DType.F32, 132)
    assert full.kind == "rows" and full.S > 1 and full.workspace == full.S * 4 and full.vec == 4
    last = plan_reduce((8192, 8192), (8192, 1), (1, 0), (1,), DType.F16, 132)
    assert last.kind == "rows" and last.S == 1 and last.vec == 8
    col = plan_reduce((8192, 8192), (8192, 1), (0, 1), (0,), DType.BF16, 132)
    assert col.kind == "cols" and col.S > 1
    multi = plan_reduce((4, 512, 896), (458752, 896, 1), (0, 0, 1), (0, 1), DType.F32, 132)
    assert multi.kind == "cols" and multi.M == 896 and multi.L == 2048
    transposed = plan_reduce((40, 300), (1, 40), (0, 0), (0, 1), DType.F32, 132)
    assert transposed.kind == "rows" and transposed.vec == 4  # collapses to one contiguous run
