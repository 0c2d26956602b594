"""Pointwise family: unary/binary activations, backward ops, swiglu, clip, where,
equal, logical_and, casts and rope, against torch eager writing into an ``out=`` buffer (one
kernel where torch has one: ``aten.<op>.out`` / ``grad_input`` overloads).

The unary and binary activations are the registry's (``unary_ops``, ``binary_ops``); an operator
without a one-kernel torch form below is timed against its own float64 reference function (run
in the benchmark's dtype). The strided, small and CPU-quick variants time a few of them.

GPU shapes: 8192² contiguous for every op in f32/f16/bf16; strided and broadcast variants at
8192² (input transposed (1, N), broadcast row (0, 1), scalar bounds (0, 0)); 256², 2048² and
32×1024×1024 for exp and gelu; casts f32->f16, f16->f32, f32->bf16, bf16->f32; rope
[4096, 32, 128] (GPT_NEOX and GPT_J) against a fused-form eager implementation (gather the
table rows, x·cos + rotate(x)·sin with addcmul into ``out``); a 1024-element exp for host wall.
CPU (``--cpu``): 4096² contiguous for a representative subset.

Minimal bytes: every input read once (a broadcast input counts its distinct elements), the
output written once; casts count the bytes of both dtypes; rope counts x, y and the table
rows it gathers (pos_ids, tables: 4096·(4 + 2·64·itemsize)).
"""

from __future__ import annotations

import functools
import re

from ..core import BenchCase, standard_workload
from ..workload import elementwise_ops

NAME = "pointwise"

DTYPES = ("f32", "f16", "bf16")
CONTIGUOUS, TRANSPOSED, BCAST_ROW, SCALAR = "contiguous", "input transposed (1,N)", "bcast row (0,1)", "scalar (0,0)"


def _tdt(torch, name):
    return getattr(torch, {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "bool": "bool"}[name])


def _unary(torch):
    a = torch.ops.aten
    return {
        "exp": (lambda o, x: torch.exp(x, out=o), {}),
        "sin": (lambda o, x: torch.sin(x, out=o), {}),
        "cos": (lambda o, x: torch.cos(x, out=o), {}),
        "tanh": (lambda o, x: torch.tanh(x, out=o), {}),
        "sigmoid": (lambda o, x: torch.sigmoid(x, out=o), {}),
        "silu": (lambda o, x: a.silu.out(x, out=o), {}),
        "relu": (lambda o, x: torch.clamp_min(x, 0, out=o), {}),
        "hardswish": (lambda o, x: a.hardswish.out(x, out=o), {}),
        "leaky_relu": (lambda o, x: a.leaky_relu.out(x, 0.01, out=o), {}),
        "gelu": (lambda o, x: a.gelu.out(x, out=o), {}),
        "gelu(tanh)": (lambda o, x: a.gelu.out(x, approximate="tanh", out=o), {"approximate": "tanh"}),
        "gelutanh": (lambda o, x: a.gelu.out(x, approximate="tanh", out=o), {}),
    }


VARIANTS = {"gelu(tanh)": {"approximate": "tanh"}}  # attribute variants timed as labels of their own
UNARY_FORM = re.compile(r"(torch|F)\.[\w.]+\(input\b")  # a torch function of ``input`` (not e.g. a cast)
ELEMENTWISE_FORM = re.compile(r"torch\.\w+\(a, b\)")  # the elementwise suite's binary operators


@functools.cache
def unary_ops() -> tuple[str, ...]:
    """Labels of the unary activations: every registered elementwise (output, input) operator
    declared as a torch function of ``input``, and the attribute variants of ``VARIANTS``."""
    ops = [s.name for s in elementwise_ops(("output", "input")) if UNARY_FORM.match(s.torch)]
    return tuple(ops + [v for v in VARIANTS if v.split("(")[0] in ops])


@functools.cache
def binary_ops() -> tuple[str, ...]:
    """The two-input activations: the registered backward passes (grad_input, input, grad_output)
    and the (c, a, b) operators that are not one torch function of a and b (swiglu)."""
    grads = [s.name for s in elementwise_ops(("grad_input", "input", "grad_output"))]
    return tuple(grads + [s.name for s in elementwise_ops(("c", "a", "b")) if not ELEMENTWISE_FORM.fullmatch(s.torch)])


def _reference_peer(op: str, attrs: dict):
    """torch's side where it has no one-kernel form below: the operator's own reference function
    on the inputs (by tensor name), returning its result."""
    from infiniop_py.registry import get_spec

    spec = get_spec(op)
    names = [t.name for t in spec.inputs]
    return lambda *ins: spec.reference(**dict(zip(names, ins)), **attrs)


def unary_case(label, dtype, shape, layout=CONTIGUOUS, host_wall=False, quick=False) -> BenchCase:
    op = label.split("(")[0]

    def build(env):
        torch = env.torch
        tdt = _tdt(torch, dtype)
        eager, attrs = _unary(torch).get(label) or (None, VARIANTS.get(label, {}))

        def make_set():
            if layout == TRANSPOSED:
                x = env.random((*shape[:-2], shape[-1], shape[-2]), tdt).transpose(-1, -2)
            else:
                x = env.random(shape, tdt)
            return [env.poisoned(shape, tdt), x], (x,)

        if eager is None:
            return standard_workload(env, op, make_set, _reference_peer(op, attrs), attrs=attrs, assign=True)
        return standard_workload(env, op, make_set, eager, attrs=attrs)

    name = "x".join(str(d) for d in shape)
    return BenchCase(NAME, op, f"{label} {name} {layout}", dtype, shape, build, host_wall=host_wall, quick=quick)


def _binary(torch):
    a = torch.ops.aten
    F = torch.nn.functional  # noqa: N806
    return {
        # (op, eager(out, *ins), input names, attrs)
        "sigmoid_backward": lambda o, y, g: a.sigmoid_backward.grad_input(g, y, grad_input=o),
        "relu_backward": lambda o, x, g: a.threshold_backward.grad_input(g, x, 0, grad_input=o),
        "gelu_backward": lambda o, x, g: a.gelu_backward.grad_input(g, x, grad_input=o),
        "swiglu": lambda o, x, b: torch.mul(x, F.silu(b), out=o),
    }


def binary_case(op, dtype, shape, layout=CONTIGUOUS, quick=False) -> BenchCase:
    """Two same-shape inputs. sigmoid_backward's torch peer gets the forward *output*
    (precomputed outside the timing), ours the forward input: same bytes, one kernel each."""

    def build(env):
        torch = env.torch
        tdt = _tdt(torch, dtype)
        eager = _binary(torch).get(op)

        def make_set():
            x = env.random(shape, tdt)
            g = env.random(shape[-1:], tdt).expand(shape) if layout == BCAST_ROW else env.random(shape, tdt)
            peer_x = torch.sigmoid(x) if op == "sigmoid_backward" and eager is not None else x
            return [env.poisoned(shape, tdt), x, g], (peer_x, g)

        if eager is None:
            return standard_workload(env, op, make_set, _reference_peer(op, {}), assign=True)
        return standard_workload(env, op, make_set, eager)

    name = "x".join(str(d) for d in shape)
    return BenchCase(NAME, op, f"{name} {layout}", dtype, shape, build, quick=quick)


def clip_case(dtype, shape, layout=CONTIGUOUS) -> BenchCase:
    def build(env):
        torch = env.torch
        tdt = _tdt(torch, dtype)

        def make_set():
            x = env.random(shape, tdt)
            if layout == SCALAR:
                lo = torch.full((1,) * len(shape), -1.0, dtype=tdt, device=env.device).expand(shape)
                hi = torch.full((1,) * len(shape), 1.0, dtype=tdt, device=env.device).expand(shape)
            else:
                lo, hi = env.random(shape, tdt, -1.5, -0.5), env.random(shape, tdt, 0.5, 1.5)
            return [env.poisoned(shape, tdt), x, lo, hi], (x, lo, hi)

        return standard_workload(env, "clip", make_set, lambda o, x, lo, hi: torch.clamp(x, lo, hi, out=o))

    return BenchCase(NAME, "clip", f"{'x'.join(map(str, shape))} bounds {layout}", dtype, shape, build)


def where_case(dtype, shape, layout=CONTIGUOUS) -> BenchCase:
    def build(env):
        torch = env.torch
        tdt = _tdt(torch, dtype)

        def make_set():
            if layout == BCAST_ROW:
                cond = (torch.rand(shape[-1:], device=env.device, generator=env.generator()) > 0.5).expand(shape)
            else:
                cond = torch.rand(shape, device=env.device, generator=env.generator()) > 0.5
            a, b = env.random(shape, tdt), env.random(shape, tdt)
            return [env.poisoned(shape, tdt), cond, a, b], (cond, a, b)

        return standard_workload(env, "where", make_set, lambda o, c, a, b: torch.where(c, a, b, out=o), exact=True)

    return BenchCase(NAME, "where", f"{'x'.join(map(str, shape))} bool condition {layout}", dtype, shape, build)


def compare_case(op, dtype, shape) -> BenchCase:
    def build(env):
        torch = env.torch
        tdt = _tdt(torch, dtype)
        fn = {"equal": torch.eq, "logical_and": torch.logical_and}[op]

        def make_set():
            a = env.random(shape, tdt)
            b = a.clone() if op == "equal" else env.random(shape, tdt)
            if op == "equal":
                b[::3] = 0  # some differences
            c = torch.empty(shape, dtype=torch.bool, device=env.device)
            env.poison(c)
            return [c, a, b], (a, b)

        return standard_workload(env, op, make_set, lambda o, a, b: fn(a, b, out=o), exact=True)

    return BenchCase(NAME, op, f"{'x'.join(map(str, shape))} -> bool", dtype, shape, build)


def cast_case(src, dst, shape, quick=False) -> BenchCase:
    def build(env):
        torch = env.torch
        ts, td = _tdt(torch, src), _tdt(torch, dst)

        def make_set():
            x = env.random(shape, ts)
            return [env.poisoned(shape, td), x], (x,)

        return standard_workload(env, "cast", make_set, lambda o, x: o.copy_(x), exact=True)

    return BenchCase(NAME, "cast", f"{'x'.join(map(str, shape))} {src}->{dst}", src, shape, build, quick=quick)


def rope_case(dtype, seq=4096, nhead=32, dhead=128, algo=1, quick=False) -> BenchCase:
    shape = (seq, nhead, dhead)

    def build(env):
        torch = env.torch
        tdt = _tdt(torch, dtype)
        half = dhead // 2
        table_len = seq

        def make_set():
            x = env.random(shape, tdt)
            pos = torch.randperm(seq, device=env.device).to(torch.int32)
            ang = torch.rand(table_len, half, device=env.device, generator=env.generator()) * 6.28
            sin, cos = ang.sin().to(tdt), ang.cos().to(tdt)
            return [env.poisoned(shape, tdt), x, pos, sin, cos], (x, pos.long(), sin, cos)

        if algo == 1:  # GPT_NEOX, the usual rotate_half form with duplicated table halves

            def eager(o, x, pos, sin, cos):
                c = cos[pos].unsqueeze(1)
                s = sin[pos].unsqueeze(1)
                c2, s2 = torch.cat((c, c), -1), torch.cat((-s, s), -1)
                rot = torch.cat((x[..., half:], x[..., :half]), -1)
                torch.addcmul(x * c2, rot, s2, out=o)
        else:  # GPT_J: interleaved pairs

            def eager(o, x, pos, sin, cos):
                c = cos[pos].unsqueeze(1)
                s = sin[pos].unsqueeze(1)
                x0, x1 = x[..., 0::2], x[..., 1::2]
                torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1, out=o.view(seq, nhead, half, 2))

        work = standard_workload(env, "rope", make_set, eager, attrs={"algo": algo})
        if dtype != "f32":
            work.atol = work.rtol = 1e-2  # torch rounds each product to the half type; ours computes in f32
        return work

    name = "GPT_NEOX" if algo else "GPT_J"
    return BenchCase(NAME, "rope", f"{seq}x{nhead}x{dhead} {name}", dtype, shape, build, quick=quick)


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    big = (8192, 8192)
    if not env.gpu:  # every op and dtype at 2048^2 (--quick: the f32 subset at 4096^2)
        mid = (2048, 2048)
        for label in ("exp", "sigmoid", "gelu", "relu"):  # representatives
            out.append(unary_case(label, "f32", (4096, 4096), quick=True))
        out.append(binary_case("swiglu", "f32", (4096, 4096), quick=True))
        out.append(cast_case("f32", "f16", (4096, 4096), quick=True))
        out.append(rope_case("f32", seq=512, quick=True))
        for dt in DTYPES:
            out += [unary_case(label, dt, mid) for label in unary_ops()]
            out += [binary_case(op, dt, mid) for op in binary_ops()]
            out += [clip_case(dt, mid), where_case(dt, mid), compare_case("equal", dt, mid)]
            out += [compare_case("logical_and", dt, mid), rope_case(dt, seq=512), rope_case(dt, seq=512, algo=0)]
        for src, dst in (("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("bf16", "f32")):
            out.append(cast_case(src, dst, mid))
        return out
    # most important first (an interrupted run keeps what it measured)
    for dt in DTYPES:
        for label in unary_ops():
            out.append(unary_case(label, dt, big, quick=label in ("exp", "gelu", "silu")))
    for src, dst in (("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("bf16", "f32")):
        out.append(cast_case(src, dst, big, quick=True))
    for dt in DTYPES:
        out.append(rope_case(dt, algo=1, quick=dt == "f16"))
        out.append(rope_case(dt, algo=0))
    for dt in DTYPES:
        for op in binary_ops():
            out.append(binary_case(op, dt, big, quick=op == "swiglu"))
        out.append(clip_case(dt, big))
        out.append(where_case(dt, big))
        out.append(compare_case("equal", dt, big))
        out.append(compare_case("logical_and", dt, big))
    for dt in DTYPES:  # strided / broadcast variants
        for label in ("exp", "gelu", "silu"):
            out.append(unary_case(label, dt, big, TRANSPOSED))
        out.append(binary_case("swiglu", dt, big, BCAST_ROW))
        out.append(binary_case("gelu_backward", dt, big, BCAST_ROW))
        out.append(clip_case(dt, big, SCALAR))
        out.append(where_case(dt, big, BCAST_ROW))
    for dt in DTYPES:
        for shape in ((256, 256), (2048, 2048), (32, 1024, 1024)):
            out.append(unary_case("exp", dt, shape))
            out.append(unary_case("gelu", dt, shape))
    out.append(unary_case("exp", "f32", (1024,), host_wall=True, quick=True))
    return out
