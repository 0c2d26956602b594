"""cast: output = input converted to the output descriptor's dtype (ops.md §1.9).

Every (src, dst) pair of ALL on both backends. In place (output on input's buffer, same shape
and strides) works when the two dtypes have one element size (f32 <-> i32, f16 -> bf16, ...);
at different sizes calculate refuses it (BAD_TENSOR_STRIDES), as for any other overlap. Rules: float -> int truncates toward zero;
int -> int wraps mod 2^bits; -> float rounds to nearest even (overflow gives +-inf); x -> bool
is x != 0 (NaN -> true); bool -> x gives 0 or 1.

Implementation-defined cases (ops.md leaves them open), as this library does them:

* NaN, +-inf or out-of-range floats -> int: NVIDIA's conversion instructions saturate (NaN -> 0,
  values beyond the range -> the type's min/max, negatives -> 0 for unsigned); the CPU backend
  uses NumPy's unsafe cast, which on x86-64 gives the "integer indefinite" value (e.g. INT_MIN)
  for 32/64-bit targets and the wrapped low bits for 8/16-bit ones. Do not rely on either.
* f64 / 32- and 64-bit integers -> f16 or bf16 go through f32 on NVIDIA (and in ml_dtypes on
  the CPU), so a value within 2^-30 relative of a rounding tie can round twice (1 ulp).
"""

from infiniop_py.dtypes import ALL, DType, is_float
from infiniop_py.elementwise import elementwise_op, split_compile_units


def _dtypes(check, out, ins):
    check.dtype_in(out, ALL)
    check.dtype_in("input", ALL)


def _kernel_types(name, dtype):
    return DType.U8 if (name == "input" and dtype is DType.BOOL) else dtype  # bool reads as a 0/1 byte


def _combos():
    return [(dst, (src,)) for src in sorted(ALL - {DType.BOOL}) for dst in sorted(ALL)]


def _reference(input, out_dtypes=None):
    import torch

    dst = (out_dtypes or {}).get("output")
    if dst is DType.BOOL:
        return input != 0
    if dst is not None and is_float(dst):
        return input.to(_torch_dtype(dst)).to(torch.float64)
    return input  # integer targets: the comparison truncates and wraps


def _torch_dtype(dst: DType):
    import torch

    return {DType.F16: torch.float16, DType.BF16: torch.bfloat16, DType.F32: torch.float32, DType.F64: torch.float64}[dst]


def _numpy(x):
    return x  # the framework's unsafe copy into the output does the conversion


SPEC = elementwise_op(
    name="cast",
    stem="Cast",
    out="output",
    ins=("input",),
    cuda="return input;",  # the framework converts the compute value once into the output type
    numpy=_numpy,
    dtypes=ALL,
    dtype_rule=_dtypes,
    type_combos=_combos,
    kernel_types=_kernel_types,
    reference=_reference,
    torch="input.to(output.dtype)",
    summary="output = input converted to output's dtype",
)

split_compile_units(SPEC)


def _cpu(info):
    """The framework, except float32 <-> float16/bfloat16 between C-contiguous tensors: one
    threaded conversion of the whole tensor (infiniop_py.halfconv.copy_into), no blocks."""
    from infiniop_py.elementwise import make_cpu
    from infiniop_py.halfconv import F32, HALF, copy_into

    generic = make_cpu(_numpy, ())(info)

    def run(views, ws, rt):
        y, x = views["output"], views["input"]
        pair = (y.dtype in HALF and x.dtype == F32) or (y.dtype == F32 and x.dtype in HALF)
        if pair and y.size and y.flags.c_contiguous and x.flags.c_contiguous:
            copy_into(y, x)
            return
        generic(views, ws, rt)

    return run


SPEC.cpu = _cpu
