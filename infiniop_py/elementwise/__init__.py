"""The elementwise framework: an operator is a C++ expression plus a NumPy function.

    SPEC = elementwise_op(name="add", stem="Add", out="c", ins=("a", "b"),
                          cuda="a + b", numpy=np.add, dtypes=F | SI | {U8},
                          reference=lambda a, b: a + b, torch="torch.add(a, b)")

Rules (ops.md §0): identical shapes; inputs may broadcast through zero strides; outputs may
not have a zero stride on a dim > 1 nor overlap themselves; any non-negative strides; f16/bf16
computed in f32 and rounded once; the output may alias an input with the same layout.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..cpu import jit, pool
from ..cpu.pool import fp_quiet, fp_restore
from ..cpu.rows import Outputs, contiguous
from ..dtypes import DType, H
from ..halfconv import copy_into, to_f32
from ..spec import Attr, Checker, Info, OpSpec, inp, out
from ..status import Status

F32 = np.dtype(np.float32)


def check_same_shape(check: Checker, names) -> None:
    first = names[0]
    for n in names[1:]:
        d = check[n]
        if d.ndim != check[first].ndim:
            check.fail(
                Status.BAD_TENSOR_SHAPE,
                f"tensor '{n}' has {d.ndim} dims {list(d.shape)}, '{first}' has {check[first].ndim} {list(check[first].shape)}",
            )
    check.same_shape(first, *names[1:])


def same_dtype_rule(dtypes):
    """Default dtype rule: the output dtype is in ``dtypes`` and every input shares it."""

    def rule(check: Checker, out_name: str, in_names) -> None:
        check.dtype_in(out_name, dtypes)
        check.same_dtype(out_name, *in_names)

    return rule


def elementwise_validate(out_name: str, in_names, reads, dtype_rule) -> Callable[[Checker], Info]:
    def validate(check: Checker) -> Info:
        names = (out_name, *in_names)
        for n in names:
            if check[n] is None:
                check.fail(Status.NULL_POINTER, f"tensor '{n}' is required")
        check_same_shape(check, names)
        dtype_rule(check, out_name, in_names)
        check.writable(out_name)
        return Info(check.op, check.tensors, check.attrs, out_name=out_name, reads=tuple(reads))

    return validate


def writes_into(fn=None, *, bitwise: bool = False):
    """Mark a NumPy function of an elementwise op as ``fn(out, *inputs, *attrs)``: it writes its
    result into ``out`` (the output part itself when it has the compute dtype and shares no
    memory with an input, else a temporary the framework rounds into the output), saving the
    temporary of the result and the copy out of it. ``bitwise``: the function only moves bits
    (e.g. a select), so half-precision inputs reach it in their own dtype, without the f32
    round trip, and ``out`` has the output's dtype."""

    def mark(f):
        f.writes_into = True
        f.bitwise = bitwise
        return f

    return mark if fn is None else mark(fn)


UINT_OF = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def select_into(out: np.ndarray, mask: np.ndarray, a, b) -> None:
    """``out = np.where(mask, a, b)`` without branches: NumPy's ``where`` (and masked copies)
    run ~5x slower on an unpredictable mask than this xor/and/xor on the integer bits."""
    u = UINT_OF[out.dtype.itemsize]
    a = np.asarray(a, out.dtype)
    b = np.asarray(b, out.dtype)
    m = np.negative(np.asarray(mask).view(np.uint8).astype(u))  # all ones where mask is true
    o = out.view(u)
    np.bitwise_xor(a.view(u), b.view(u), out=o)
    np.bitwise_and(o, m, out=o)
    np.bitwise_xor(o, b.view(u), out=o)


def sigmoid_into(out: np.ndarray, x) -> None:
    """``out = 1 / (1 + exp(-x))`` in place (``out`` must not alias ``x``): sigmoid and sigmoid_backward."""
    np.negative(x, out=out)
    np.exp(out, out=out)
    np.add(out, out.dtype.type(1), out=out)
    np.reciprocal(out, out=out)


# Binary ufuncs with a compiled kernel for dense half-precision operands (cpu/kernels.py: binary)
_BINARY = {np.add: 0, np.subtract: 1, np.multiply: 2, np.true_divide: 3}
_BITS = {DType.F16: np.uint16, DType.BF16: np.int16, DType.F32: None}  # how cpu/kernels.py reads a dtype


def _fused(numpy_fn, cpu_kernel, info: Info, attrs):
    """``f(kernels, out_flat, *in_flat)`` running a compiled kernel (cpu/kernels.py) on dense
    operands, or None where the op has none for these dtypes: ``cpu_kernel`` names one taking
    (*inputs, out) for f32/f16/bf16 operands of one dtype; the binary arithmetic ufuncs have
    one for f16/bf16 (in f32 NumPy's own loop already runs at memory speed)."""
    dts = {info.tensors[n].dtype for n in (info.out_name, *info.reads)}
    if len(dts) != 1 or attrs:
        return None
    dt = dts.pop()
    if dt not in _BITS:
        return None
    if cpu_kernel is not None:
        return lambda k, out, *ins: getattr(k, cpu_kernel)(*ins, out)
    code = _BINARY.get(numpy_fn) if isinstance(numpy_fn, np.ufunc) and dt in H else None
    if code is None:
        return None
    return lambda k, out, a, b: k.binary(code, a, b, out)


def _small_call(numpy_fn, cpu_kernel, info: Info, attrs, general):
    """The CPU ``run(views, ws, rt)`` of a call small enough for one thread whose operands are
    all C-contiguous and of one dtype among f32/f16/bf16 (decided at create: calculate hands
    the kernel views laid out exactly as the descriptors): the compiled kernel's machine code
    straight on the operands (:func:`infiniop_py.cpu.jit.entry`), halves read as their bits,
    with no dispatch, views or reshapes around it; per-call glue is most of such a call.
    Where the kernels are off (:func:`~infiniop_py.cpu.jit.pure_numpy`) or an operand is
    misaligned, ``general(views, ws, rt)`` runs instead. None where the descriptor does not
    qualify: ops other than the binary arithmetic ufuncs and unary ones with a kernel of their
    own (``cpu_kernel``), attributes, other layouts, more than :data:`CHUNK` * 2 elements. The
    binary arithmetic ufuncs take the compiled kernel in f32 too (IEEE arithmetic: the bits of
    NumPy's loop, without NumPy's floating-point-state switch)."""
    reads = info.reads
    names = (info.out_name, *reads)
    descs = [info.tensors[n] for n in names]
    dt = descs[0].dtype
    n = descs[0].numel
    if attrs or dt not in _BITS or not 0 < n < 2 * CHUNK:
        return None
    if any(d.dtype != dt or not d.is_contiguous() for d in descs):
        return None
    if cpu_kernel is not None and len(reads) == 1:
        name, lead = cpu_kernel, ()
    elif cpu_kernel is None and isinstance(numpy_fn, np.ufunc) and numpy_fn in _BINARY and len(reads) == 2:
        name, lead = "binary", (_BINARY[numpy_fn],)
    else:
        return None
    example = np.zeros(1, _BITS[dt] or np.float32)
    fn = jit.entry(name, *lead, *[example] * len(names))
    if fn is None:
        return None
    kernels = jit.kernels
    flat = descs[0].ndim != 1  # the kernels take 1-D operands
    out_name = info.out_name
    if not lead:
        (ra,) = reads

        def unary(views, ws, rt):
            dst, a = views[out_name], views[ra]
            if kernels() is None or not (dst.flags.aligned and a.flags.aligned):
                return general(views, ws, rt)
            if flat:
                dst, a = dst.reshape(-1), a.reshape(-1)
            fn(a, dst)

        return unary
    ra, rb = reads
    (code,) = lead

    def binary(views, ws, rt):
        dst, a, b = views[out_name], views[ra], views[rb]
        if kernels() is None or not (dst.flags.aligned and a.flags.aligned and b.flags.aligned):
            return general(views, ws, rt)
        if flat:
            dst, a, b = dst.reshape(-1), a.reshape(-1), b.reshape(-1)
        fn(code, a, b, dst)

    return binary


def _flat_bits(a: np.ndarray, bits) -> np.ndarray:
    """A C-contiguous operand as the compiled kernels read it: 1-D, halves as integer ``bits``."""
    if bits is not None:
        a = a.view(bits)
    return a if a.ndim == 1 else a.reshape(-1)


def make_cpu(numpy_fn, attr_names, compute_dtype=None, cpu_kernel=None):
    """NumPy implementation: half inputs go through f32; the result is rounded once into ``out``.

    Large tensors are processed in cache-sized blocks on the CPU thread pool (NumPy releases
    the GIL in ufuncs and casts); half-precision blocks are converted to f32 scratch buffers
    once. A function marked by :func:`writes_into` computes into the output (or one temporary)
    in place. Dense operands of one dtype take a compiled kernel where there is one
    (:func:`_fused`; numba, optional).
    """

    def factory(info: Info):
        out_name, reads = info.out_name, info.reads
        attrs = [info.attrs[a] for a in attr_names]
        out_dt = info.tensors[out_name].dtype
        direct = (
            isinstance(numpy_fn, np.ufunc)
            and out_dt not in H
            and not attrs
            and all(info.tensors[r].dtype == out_dt for r in reads)
        )
        cdt = compute_dtype(info) if compute_dtype is not None else None
        into = getattr(numpy_fn, "writes_into", False)
        bitwise = getattr(numpy_fn, "bitwise", False)
        fused = _fused(numpy_fn, cpu_kernel, info, attrs) if cdt is None else None
        fbits = _BITS.get(out_dt)  # the fused path's one dtype, as its kernels read it
        fbits = None if fbits is None else np.dtype(fbits)

        work_dt = F32 if out_dt in H and not bitwise else None  # None: the output's own dtype
        # a ufunc of f32 operands rounded into a half output: its f32 result goes to a scratch block
        ufunc_f32 = isinstance(numpy_fn, np.ufunc) and out_dt in H and not attrs and cdt is None and numpy_fn.nout == 1
        ufunc_f32 = ufunc_f32 and all(info.tensors[r].dtype in H | {DType.F32} for r in reads)

        def compute_into(dst, *args):
            if not bitwise:
                args = [_upcast(a, i) for i, a in enumerate(args)]
            if work_dt is None and not any(np.may_share_memory(dst, a) for a in args):
                numpy_fn(dst, *args, *attrs)
                return
            tmp = pool.scratch("ew.out", dst.shape, work_dt or dst.dtype)
            numpy_fn(tmp, *args, *attrs)
            copy_into(dst, tmp)

        def compute(dst, *args):
            token = fp_quiet()
            try:
                if into and cdt is None:
                    compute_into(dst, *args)
                    return
                if direct:
                    numpy_fn(*args, out=dst)
                    return
                args = [_upcast(a, i) for i, a in enumerate(args)]
                if ufunc_f32:
                    copy_into(dst, numpy_fn(*args, out=pool.scratch("ew.out", dst.shape, F32)))
                    return
                if cdt is not None:
                    args = [a.astype(cdt) for a in args]
                copy_into(dst, numpy_fn(*args, *attrs))
            finally:
                fp_restore(token)

        def run(views, ws, rt):
            dst = views[out_name]
            n = dst.size
            if not n:
                return
            args = [views[r] for r in reads]
            if direct and n < 2 * CHUNK:  # small, one NumPy call: the least Python around it
                token = fp_quiet()
                try:
                    numpy_fn(*args, out=dst)
                finally:
                    fp_restore(token)
                return
            if fused is not None:
                k = jit.kernels()
                dense = dst.flags.c_contiguous
                for a in args:
                    dense = dense and a.flags.c_contiguous
                # an op's own kernel runs on every layout (contiguous copies in, a temporary out),
                # so its results do not depend on the layout; the binary arithmetic ufuncs give
                # the NumPy path's bits anyway
                if k is not None and (dense or cpu_kernel is not None):
                    outs = None if dense else Outputs()
                    flat = [_flat_bits(dst if dense else outs.full(dst), fbits)]
                    for a in args:
                        flat.append(_flat_bits(a if dense else contiguous(a), fbits))
                    if n < 2 * CHUNK:
                        fused(k, *flat)
                    else:
                        pool.run_flat(lambda o, *i: fused(k, o, *i), flat)
                    if outs is not None:
                        outs.done()
                    return
            if n < 2 * CHUNK:
                compute(dst, *args)
                return
            # no temporaries on the direct path: a few parts per thread, not cache-sized blocks
            parallel_chunks(compute, dst, args, block=-(-n // (pool.PARTS_PER_THREAD * pool.THREADS)) if direct else CHUNK)

        small = _small_call(numpy_fn, cpu_kernel, info, attrs, run) if cdt is None else None
        return run if small is None else small

    return factory


def _upcast(a: np.ndarray, slot: int = 0) -> np.ndarray:
    """f16/bf16 -> f32 (other dtypes unchanged) into the calling thread's scratch block ``slot``,
    converting a broadcast (zero-stride) operand once, not once per use."""
    if a.dtype.itemsize != 2 or a.dtype.kind in "iub":
        return a
    if a.size > 1 and 0 in a.strides:
        idx = tuple(slice(0, 1) if st == 0 and d > 1 else slice(None) for d, st in zip(a.shape, a.strides, strict=True))
        return np.broadcast_to(to_f32(a[idx]), a.shape)
    return to_f32(a, pool.scratch(("ew.in", slot), a.shape, F32))


CHUNK = 1 << 16  # elements per block: f32 temporaries of a block stay in the L2 cache


def parallel_chunks(fn, dst: np.ndarray, args, keep_axis: int | None = None, block: int = CHUNK) -> None:
    """``fn(dst_part, *arg_parts)`` over blocks of about ``block`` elements (at least
    :data:`CHUNK`), slices of the longest axis (all operands share the shape), shared out over
    the CPU thread pool (:func:`infiniop_py.cpu.pool.run_all`). The slicing depends only on the
    shape, not on the threads.

    ``keep_axis``: an axis that must stay whole in every part (e.g. the one a row-wise op reduces)."""
    n = dst.size
    block = max(block, CHUNK)
    shape = list(dst.shape)
    if keep_axis is not None and dst.ndim:
        shape[keep_axis % dst.ndim] = 0
    if n < 2 * CHUNK or dst.ndim == 0 or max(shape, default=0) < 2:
        fn(dst, *args)
        return
    axis = int(np.argmax(shape))
    head = (slice(None),) * axis

    def run(lo, hi):
        idx = (*head, slice(lo, hi))
        fn(dst[idx], *(a[idx] for a in args))

    pool.run_all(run, pool.bounds(dst.shape[axis], -(-n // block)))


def elementwise_op(
    *,
    name: str,
    stem: str,
    out: str | tuple = "c",
    ins: tuple = ("a", "b"),
    cuda: str,
    numpy: Callable,
    dtypes,
    reference: Callable | None = None,
    torch: str = "",
    summary: str = "",
    attrs: tuple[Attr, ...] = (),
    reads: tuple[str, ...] | None = None,
    dtype_rule: Callable | None = None,
    inplace: tuple[str, ...] | None = None,
    gguf_names: tuple[str, ...] = (),
    tensor_aliases: dict | None = None,
    type_combos: Callable | None = None,
    kernel_types: Callable | None = None,
    cuda_variant: Callable | None = None,
    cpu_kernel: str | None = None,
    dense_rules: tuple | None = None,
    **extra,
) -> OpSpec:
    """Build the OpSpec of an elementwise operator.

    Args:
        out, ins: tensor names (outputs first, then inputs, as in ops.md).
        cuda: C++ expression (or a body with ``return``) over the read inputs, named as in
            ``ins``; attributes are available as locals of the compute type ``T``.
        numpy: function of the read inputs (f32 for half types) and the attribute values.
        reads: inputs the kernel reads (default: all of ``ins``); others only supply a shape.
        dtype_rule: ``rule(check, out, ins)`` for mixed-dtype operators.
        inplace: inputs the output may alias (default: every read input).
        type_combos: ``() -> [(out_dtype, (read input dtypes...))]`` the NVIDIA kernels are
            instantiated for in the compile check (default: one dtype for every operand).
        kernel_types: ``(tensor_name, dtype) -> dtype``: the storage type the NVIDIA kernel is
            instantiated with for a tensor, when a bit-compatible substitute gives the same
            result (e.g. bool/i8 outputs holding 0/1 written as u8, a bitwise select moving
            f32 as u32). Cuts the instantiations; ``type_combos`` lists the substituted types.
        cuda_variant: optional ``(out_dtype, choices) -> expression`` replacing ``cuda`` per
            descriptor: ``out_dtype`` is the output's (kernel) dtype, ``choices`` maps every
            ``str`` attribute with ``choices`` to its value. Each distinct expression is its own
            functor, so an attribute-selected form is fixed at create (no run-time branch, no
            registers for the unused form) and half outputs may use cheaper f32 formulations.
        cpu_kernel: name of a compiled kernel in ``infiniop_py/cpu/kernels.py`` taking
            ``(*read_inputs, out)``, run instead of ``numpy`` when numba is available, every
            operand is C-contiguous and all share one dtype among f32/f16/bf16; its results must
            stay within the dtype's tolerance of ``numpy``'s.
        dense_rules: the rule table (``infiniop_py.planner.Rule`` over
            ``elementwise.cuda.DenseProblem``) choosing the NVIDIA dense-path kernel config
            (``elementwise.cuda.DENSE``) by operand width; default: ``elementwise.cuda.DENSE_RULES``.

    A ``str`` attribute with ``choices`` reaches the C++ expression as the index of its value
    in ``choices`` (e.g. gelu's ``approximate``: "none" -> 0, "tanh" -> 1); NumPy gets the string.
    """
    from .cuda import DENSE_RULES, make_nvidia

    dense_rules = dense_rules or DENSE_RULES
    out_name = out
    reads = tuple(ins) if reads is None else tuple(reads)
    aliases = tensor_aliases or {}
    tensors = (
        _role("out", out_name, aliases),
        *(_role("in", n, aliases) for n in ins),
    )
    rule = dtype_rule or same_dtype_rule(dtypes)
    attr_names = tuple(a.name for a in attrs)
    combos = type_combos or (lambda: [(d, (d,) * len(reads)) for d in sorted(dtypes)])
    return OpSpec(
        name=name,
        stem=stem,
        tensors=tensors,
        attrs=attrs,
        dtypes=frozenset(dtypes),
        validate=elementwise_validate(out_name, tuple(ins), reads, rule),
        cpu=make_cpu(numpy, attr_names, cpu_kernel=cpu_kernel),
        nvidia=_nvidia_adapter(
            variant_nvidia(name, cuda_variant, reads, attrs, combos, dense_rules)
            if cuda_variant is not None
            else make_nvidia(name, cuda, reads, attr_names, combos, dense_rules),
            attrs,
            kernel_types,
        ),
        reference=reference,
        infer=lambda **descs: {out_name: descs[ins[0]]} if ins else None,
        torch=torch,
        summary=summary,
        gguf_names=gguf_names,
        inplace=tuple((out_name, i) for i in (reads if inplace is None else inplace)),
        kernel_sources=("<elementwise>",),
        **extra,
    )


def _nvidia_adapter(factory, attrs, kernel_types):
    """Wrap a NVIDIA factory: string attributes become choice indices, dtypes are substituted."""
    coded = {a.name: a.choices for a in attrs if a.kind == "str" and a.choices}
    if not coded and kernel_types is None:
        return factory

    def adapted(info: Info, handle):
        attrs_ = dict(info.attrs)
        for n, choices in coded.items():
            attrs_[n] = choices.index(attrs_[n])
        tensors = dict(info.tensors)
        if kernel_types is not None:
            tensors = {n: d if d is None else d.with_dtype(kernel_types(n, d.dtype)) for n, d in tensors.items()}
        extra = {k: v for k, v in info.__dict__.items() if k not in ("op", "tensors", "attrs")}
        return factory(Info(info.op, tensors, attrs_, **extra), handle)

    adapted.compile_units = factory.compile_units
    adapted.dense_rules = factory.dense_rules
    return adapted


def variant_nvidia(name: str, variant: Callable, reads, attrs, combos, dense_rules):
    """NVIDIA factory choosing the C++ expression per descriptor with ``variant(out_dtype, choices)``
    (see ``elementwise_op(cuda_variant=...)``); ``compile_units`` covers every dtype combination
    with every choice value."""
    import hashlib
    import itertools

    from .cuda import make_nvidia

    attr_names = tuple(a.name for a in attrs)
    coded = {a.name: tuple(a.choices) for a in attrs if a.kind == "str" and a.choices}

    def tag(expr: str) -> str:
        return f"{name}_{hashlib.sha1(expr.encode()).hexdigest()[:10]}"

    factories: dict = {}

    def factory(info: Info, handle):
        # the adapter has coded str attributes as choice indices: decode them for ``variant``
        choices = {n: c[int(info.attrs[n])] if not isinstance(info.attrs[n], str) else info.attrs[n] for n, c in coded.items()}
        expr = variant(info.tensors[info.out_name].dtype, choices)
        f = factories.get(expr)
        if f is None:
            f = factories[expr] = make_nvidia(tag(expr), expr, reads, attr_names, combos, dense_rules)
        return f(info, handle)

    def compile_units():
        groups: dict = {}
        for combo in combos():
            for values in itertools.product(*coded.values()):
                expr = variant(combo[0], dict(zip(coded, values)))
                group = groups.setdefault(expr, [])
                if combo not in group:
                    group.append(combo)
        units = []
        for expr, group in groups.items():
            units += make_nvidia(tag(expr), expr, reads, attr_names, lambda g=group: g, dense_rules).compile_units()
        return units

    factory.compile_units = compile_units
    factory.dense_rules = dense_rules
    return factory


def _role(kind: str, name: str, aliases: dict):
    al = tuple(a for a, canonical in aliases.items() if canonical == name)
    return out(name, aliases=al) if kind == "out" else inp(name, aliases=al)


__all__ = ["elementwise_op", "float_expr", "DType"]


_MATH_FNS = ("exp", "sin", "cos", "tanh", "erf", "sqrt", "log", "fabs")


def float_expr(template: str) -> str:
    """A C++ body for floating compute types: ``{exp}``-style placeholders become the f64
    function (``exp``) when ``T`` is double and the accurate f32 one (``expf``) otherwise.

    Write literal braces of the template doubled (``{{`` ``}}``); ``template`` is an expression
    or a body containing ``return``.
    """

    def body(suffix: str) -> str:
        e = template.format(**{f: f + suffix for f in _MATH_FNS})
        return e if "return" in e else f"return {e};"

    return f"if constexpr (sizeof(T) == 8) {{ {body('')} }} else {{ {body('f')} }}"


def split_compile_units(spec: OpSpec, chunk: int = 128) -> None:
    """Split an elementwise op's compile-check unit into units of at most ``chunk`` kernels
    (operators with many dtype combinations compile faster, and in parallel, in pieces)."""
    whole = spec.nvidia.compile_units

    def units():
        out = []
        for src, names in whole():
            out += [(src, names[i : i + chunk]) for i in range(0, len(names), chunk)]
        return out

    spec.nvidia.compile_units = units
