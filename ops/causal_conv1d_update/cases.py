from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T
from infiniop_py.testing.causal_cases import BF16, F16, F32, X3, make_data

I32, I64 = DType.I32, DType.I64


def upd(B, D, T_=None, W=4, S=None, idx=None, wdt=None, bias=True, x=None, o=None, cs=None):  # noqa: N803
    """Tensors of one update case: x (B, D) when ``T_`` is None, else (B, D, T_); S states
    (default B); ``idx`` the dtype of conv_state_indices (None: absent); ``x``/``o``/``cs``
    strides of x, out and conv_state (None: contiguous)."""
    shape = (B, D) if T_ is None else (B, D, T_)
    S = B if S is None else S  # noqa: N806
    return {
        "out": T(shape, o),
        "conv_state": T((S, D, W - 1), cs),
        "x": T(shape, x),
        "weight": T((D, W), None, wdt),
        "bias": T((D,), None, wdt) if bias else None,
        "conv_state_indices": None if idx is None else T((B,), None, idx),
    }


def C(tensors, desc, dtypes=X3, silu=False, oob=False, dup=False):  # noqa: N802
    attrs = {"activation": "silu"} if silu else {}
    return Case(tensors, dtypes, desc, attrs=attrs, data=make_data(tensors["conv_state"].shape[0], oob, dup))


CASES = [
    C(upd(4, 64), "one token, x (B, D)"),
    C(upd(4, 64, 1), "one token, x (B, D, 1)", silu=True),
    C(upd(3, 40, 3, W=2), "W2, 3 tokens"),
    C(upd(3, 40, 8, W=8), "W8, 8 tokens", silu=True),
    C(upd(5, 33, 2, W=3, bias=False), "W3, no bias"),
    C(upd(2, 7, 5, W=5), "W5, odd channels"),
    C(upd(2, 8, 4, W=6), "W6"),
    C(upd(2, 9, 6, W=7), "W7", silu=True),
    C(upd(6, 48, 1, S=10, idx=I32), "conv_state_indices i32 with padding slots"),
    C(upd(6, 48, 4, S=9, idx=I64, W=8), "conv_state_indices i64, 4 tokens", silu=True),
    C(upd(6, 16, 2, S=7, idx=I32), "indices >= S are padding slots (no access outside conv_state)", oob=True),
    C(upd(7, 16, 3, S=9, idx=I64), "rows naming one slot are padding slots", dup=True),
    C(upd(64, 64, None), "B=64 decode step"),
    C(upd(3, 40, 3, wdt=F32), "f16 x, f32 weight", dtypes=(F16,)),
    C(upd(3, 40, 3, wdt=BF16), "f32 x, bf16 weight", dtypes=(F32,), silu=True),
    C(upd(3, 40, 3, wdt=F16), "bf16 x, f16 weight", dtypes=(BF16,)),
    C(upd(3, 20, 2, cs=(60, 1, 20)), "conv_state stored (S, W-1, D) (channel-last)"),
    C(upd(3, 20, 2, cs=(200, 10, 1), x=(1, 6, 3), o=(40, 2, 1)), "padded conv_state, strided x and out"),
    C(upd(4, 10, None, x=(1, 4), o=(20, 2)), "x (B, D) column-major, gapped out"),
    C(upd(0, 8, 2), "empty batch"),
]
