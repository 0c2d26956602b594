from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T
from infiniop_py.testing.causal_cases import BF16, F16, F32, X3, make_data, seed_configs, strides

DATA = make_data()
I32, I64 = DType.I32, DType.I64


def fwd(B, D, L, W=4, x="cf", o=None, wdt=None, bias=True, init=None, final=None, seq=None, wstr=None):  # noqa: N803
    """Tensors of one forward case; ``init``/``final`` are a layout name (or None for absent)."""
    return {
        "out": T((B, D, L), strides(B, D, L, o or x)),
        "final_states": None if final is None else T((B, D, W - 1), strides(B, D, W - 1, final)),
        "x": T((B, D, L), strides(B, D, L, x)),
        "weight": T((D, W), wstr, wdt),
        "bias": T((D,), None, wdt) if bias else None,
        "initial_states": None if init is None else T((B, D, W - 1), strides(B, D, W - 1, init)),
        "seq_idx": None if seq is None else T((B, L), None, seq),
    }


def C(tensors, desc, dtypes=X3, silu=False, suites=("quick",), **kw):  # noqa: N802
    attrs = {"activation": "silu"} if silu else {}
    return Case(tensors, dtypes, desc, attrs=attrs, data=DATA, suites=suites, **kw)


CASES = [C(fwd(*size, 4, x=lay), desc, silu=silu, suites=suites) for size, lay, silu, desc, suites in seed_configs()]

CASES += [
    # widths 2..8 (specialised kernels) over sequence lengths around the tile edges
    C(fwd(2, 5, 63, 2), "W2 L63 cf"),
    C(fwd(3, 7, 64, 3, x="cl"), "W3 L64 cl", silu=True),
    C(fwd(2, 9, 65, 4), "W4 L65 cf"),
    C(fwd(2, 33, 127, 5, x="cl"), "W5 L127 cl"),
    C(fwd(2, 6, 128, 6), "W6 L128 cf", silu=True),
    C(fwd(2, 70, 129, 7, x="cl"), "W7 L129 cl", silu=True),
    C(fwd(2, 3, 256, 8), "W8 L256 cf"),
    C(fwd(2, 40, 257, 8, x="cl"), "W8 L257 cl", silu=True),
    C(fwd(1, 3, 1100, 5), "W5 L1100 cf, several tiles per row"),
    C(fwd(2, 260, 20, 4, x="cl"), "W4 L20 cl, 260 channels (partial channel pack, three blocks)"),
    C(fwd(1, 1, 7, 3), "one channel, 7 steps"),
    # wide kernels: the generic path
    C(fwd(2, 6, 40, 9), "W9 (generic path)"),
    C(fwd(2, 5, 100, 33, x="cl"), "W33 cl (generic path)", silu=True),
    C(fwd(1, 3, 70, 64, init="cf", final="cf"), "W64 with initial and final states"),
    # x and weight dtypes chosen independently
    C(fwd(2, 12, 130, 4, wdt=BF16), "f32 x, bf16 weight", dtypes=(F32,), silu=True),
    C(fwd(2, 12, 130, 4, x="cl", wdt=F32), "f16 x, f32 weight, cl", dtypes=(F16,)),
    C(fwd(2, 12, 130, 4, wdt=F16), "bf16 x, f16 weight", dtypes=(BF16,)),
    C(fwd(2, 12, 130, 33, wdt=F32), "bf16 x, f32 weight, W33", dtypes=(BF16,)),
    # initial and final states
    C(fwd(2, 9, 65, 4, init="cf", final="cf"), "initial and final states"),
    C(fwd(2, 16, 129, 6, x="cl", init="cl", final="cl"), "initial and final states, channel-last", silu=True),
    C(fwd(2, 9, 300, 8, init="gap", final="gap", bias=False), "gapped states, no bias"),
    C(fwd(2, 5, 2, 6, init="cf", final="cf"), "L=2 < W-1: final states keep part of initial_states"),
    C(fwd(2, 5, 3, 6, final="cl"), "L=3 < W-1, no initial states: final states zero-padded"),
    C(fwd(2, 4, 0, 4, init="cf", final="cf"), "L=0: final states = initial states"),
    C(fwd(2, 4, 5, 4, final="cf"), "final states only"),
    # seq_idx (negative = padding token), sequence starts at block edges
    C(fwd(2, 12, 300, 4, seq=I32), "seq_idx i32", silu=True),
    C(fwd(2, 36, 129, 3, x="cl", seq=I64), "seq_idx i64, cl"),
    C(fwd(2, 5, 520, 8, seq=I32, bias=False), "seq_idx W8, no bias"),
    C(fwd(2, 5, 140, 33, seq=I64), "seq_idx W33 (generic path)", silu=True),
    C(fwd(2, 8, 600, 4, x="cl", seq=I32), "seq_idx cl, long", silu=True),
    # other layouts
    C(fwd(2, 6, 70, 4, x="gap", o="cf"), "gapped x (time stride 2)"),
    C(fwd(3, 5, 70, 4, x="bmajor"), "batch-innermost x and out (strided path)", silu=True),
    C(fwd(2, 10, 70, 4, x="cf_pad", o="cl_pad"), "padded channel-first x, padded channel-last out"),
    C(fwd(2, 10, 70, 4, x="cl", o="cf"), "channel-last x, channel-first out"),
    C(fwd(2, 10, 80, 5, x="cl_pad", init="bmajor", final="bmajor"), "padded channel-last, strided states"),
    C(fwd(2, 10, 80, 4, wstr=(1, 10)), "transposed weight"),
    C(fwd(0, 4, 8, 4), "empty batch"),
    Case(fwd(2, 5, 20, 4), X3, "activation swish (alias of silu)", attrs={"activation": "swish"}, data=DATA),
    Case(fwd(2, 5, 20, 4), X3, "activation None (alias of none)", attrs={"activation": None}, data=DATA),
]
