"""Pooling operators (avg_pool, avg_pool_backward, max_pool, max_pool_backward; ops.md §6.4-6.8):
create-time validation, the NVIDIA backend on a fake device (launches, the device's SM count in
the plans), upstream-style GGUF files, and GPU-only checks (determinism, the gather fallback,
layouts). The launch plans' index arithmetic, run in Python: test_pool_plans.py. The case tables
themselves run in test_ops.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import requires_gpu

import infiniop_py as iop
from infiniop_py.descriptor import create_descriptor
from infiniop_py.dtypes import DType
from infiniop_py.pool import cuda as pc
from infiniop_py.registry import get_cases, get_spec
from infiniop_py.status import InfiniopError, Status
from infiniop_py.tensor import TensorDescriptor
from infiniop_py.testing.pool_cases import out_shape, strides_for

FWD = ("avg_pool", "max_pool")
BWD = ("avg_pool_backward", "max_pool_backward")
POOL_OPS = FWD + BWD


def td(shape, strides=None, dtype=DType.F32):
    return TensorDescriptor(tuple(shape), strides, dtype)


def descs(op, shape, attrs, dtype=DType.F32, out=None):
    """Tensor descriptors for ``op`` on an input of ``shape`` (contiguous); ``out`` overrides the
    output / grad_output shape."""
    o = out if out is not None else out_shape(shape, {"padding": 0, **attrs})
    if op in FWD:
        return {"output": td(o, dtype=dtype), "input": td(shape, dtype=dtype)}
    return {"grad_input": td(shape, dtype=dtype), "grad_output": td(o, dtype=dtype), "input": td(shape, dtype=dtype)}


def create(op, tensors, device="cpu", **attrs):
    return create_descriptor(op, iop.create_handle(device), **tensors, **attrs)


# -- validation -------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize(
    "attrs,status,word",
    [
        ({"kernel_size": [0]}, Status.BAD_PARAM, "kernel_size"),
        ({"kernel_size": [2, 2, 2]}, Status.BAD_PARAM, "kernel_size"),
        ({"kernel_size": [2], "stride": [0]}, Status.BAD_PARAM, "stride"),
        ({"kernel_size": [2], "stride": [1, 1, 1]}, Status.BAD_PARAM, "stride"),
        ({"kernel_size": [2], "padding": [-1]}, Status.BAD_PARAM, "padding"),
        ({"kernel_size": [3], "padding": [2]}, Status.BAD_PARAM, "padding"),
        ({"kernel_size": [3], "padding": [1, 1, 1]}, Status.BAD_PARAM, "padding"),
        ({"kernel_size": "3"}, Status.BAD_PARAM, "kernel_size"),
        ({"kernel_size": [3], "ceil_mode": 2}, Status.BAD_PARAM, "ceil_mode"),
    ],
)
def test_bad_attributes(op, attrs, status, word):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}), **attrs)
    assert e.value.status == status and word in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
def test_kernel_size_required(op):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}))
    assert e.value.status == Status.BAD_PARAM and "kernel_size" in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("shape", [(3, 8), (1, 2, 3, 4, 5, 6), (8,)])
def test_rank_outside_3_to_5(op, shape):
    t = (
        {n: td(shape) for n in ("output", "input")}
        if op in FWD
        else {n: td(shape) for n in ("grad_input", "grad_output", "input")}
    )
    with pytest.raises(InfiniopError) as e:
        create(op, t, kernel_size=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE


@pytest.mark.parametrize("op", POOL_OPS)
def test_kernel_larger_than_padded_input(op):
    """Output size < 1 (ops.md §6.4: the shape cannot match): BAD_TENSOR_SHAPE."""
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 4, 4), {}, out=(2, 3, 1, 1)), kernel_size=[7], padding=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE and "larger than the padded input" in str(e.value)
    # the same window fits once the padding makes room: L + 2p = 4 + 2*3 >= 7
    create(op, descs(op, (2, 3, 4, 4), {}, out=(2, 3, 4, 4)), kernel_size=[7], stride=[1], padding=[3]).destroy()


@pytest.mark.parametrize("op", POOL_OPS)
def test_empty_spatial_dim(op):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 0, 4), {}, out=(2, 3, 1, 2)), kernel_size=[2], padding=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE and "empty" in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("delta", [(0, 0, 1, 0), (0, 0, 0, -1), (0, 1, 0, 0), (1, 0, 0, 0)])
def test_output_shape_mismatch(op, delta):
    good = out_shape((2, 3, 9, 9), {"kernel_size": [3], "stride": [2], "padding": [1]})
    bad = tuple(a + b for a, b in zip(good, delta))
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 9, 9), {}, out=bad), kernel_size=[3], stride=[2], padding=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE


@pytest.mark.parametrize("op", BWD)
def test_grad_input_shape_mismatch(op):
    t = descs(op, (2, 3, 8, 8), {"kernel_size": [2]})
    t["grad_input"] = td((2, 3, 8, 9))
    with pytest.raises(InfiniopError) as e:
        create(op, t, kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_SHAPE and "grad_input" in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
def test_ceil_mode_changes_the_required_shape(op):
    # L=5, k2 s2 p1: floor -> 3; ceil -> 4 - 1 (the 4th window would start in the right padding) = 3
    # L=6, k2 s2 p0: floor -> 3; ceil -> 3; L=7 k2 s2: floor 3, ceil 4
    create(op, descs(op, (1, 1, 7), {}, out=(1, 1, 4)), kernel_size=[2], ceil_mode=True).destroy()
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (1, 1, 7), {}, out=(1, 1, 4)), kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_SHAPE
    create(op, descs(op, (1, 1, 5), {}, out=(1, 1, 3)), kernel_size=[2], padding=[1], ceil_mode=True).destroy()


@pytest.mark.parametrize("op", POOL_OPS)
def test_mixed_dtypes(op):
    for name in descs(op, (2, 3, 8, 8), {"kernel_size": [2]}):
        t = descs(op, (2, 3, 8, 8), {"kernel_size": [2]})
        t[name] = td(t[name].shape, dtype=DType.F16)
        with pytest.raises(InfiniopError) as e:
            create(op, t, kernel_size=[2])
        assert e.value.status == Status.BAD_TENSOR_DTYPE, name


@pytest.mark.parametrize("op", POOL_OPS)
def test_integer_dtype_refused(op):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}, DType.I32), kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_DTYPE


@pytest.mark.parametrize("op", POOL_OPS)
def test_output_not_writable(op):
    t = descs(op, (2, 3, 8, 8), {"kernel_size": [2]})
    name = "output" if op in FWD else "grad_input"
    shape = t[name].shape
    t[name] = td(shape, (0,) + tuple(strides_for(shape, range(4))[1:]))
    with pytest.raises(InfiniopError) as e:
        create(op, t, kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_STRIDES


@pytest.mark.parametrize("op", POOL_OPS)
def test_stride_none_or_empty_is_kernel_size(op):
    for stride in (None, [], ()):
        d = create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}), kernel_size=[2], stride=stride)
        d.destroy()


@pytest.mark.parametrize("op", FWD)
def test_failed_calculate_writes_nothing(op):
    """A buffer too small for its descriptor fails before anything is written."""
    d = create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}), kernel_size=[2])
    out = np.full((2, 3, 4, 4), 7.0, np.float32)
    with pytest.raises(InfiniopError) as e:
        d.calculate(None, out, np.zeros(10, np.float32))
    assert e.value.status == Status.BAD_PARAM and np.all(out == 7.0)
    d.destroy()


def test_cstyle_names_and_upstream_order():
    """infiniopCreateAvgPoolDescriptor(handle, desc, output, input, kernel_size, strides, pads, ceil_mode)."""
    h = iop.create_handle("cpu")
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)
    y = np.zeros((2, 3, 3, 3), np.float32)
    d = iop.infiniopCreateAvgPoolDescriptor(h, td(y.shape), td(x.shape), [2, 2], [2, 2], [0, 0], False)
    assert iop.infiniopGetAvgPoolWorkspaceSize(d) == 0
    iop.infiniopAvgPool(d, None, 0, y, x, None)
    iop.infiniopDestroyAvgPoolDescriptor(d)
    assert np.allclose(y, x.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)))
    for stem in ("AvgPoolBackward", "MaxPool", "MaxPoolBackward"):
        assert callable(getattr(iop, f"infiniopCreate{stem}Descriptor"))


def test_iop_ops_infers_the_output():
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 10)).astype(np.float32)
    y = iop.ops.max_pool(x, kernel_size=(3,), stride=(2,), padding=(1,))
    import torch

    assert np.array_equal(y, torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy())
    g = iop.ops.max_pool_backward(np.ones_like(y), x, kernel_size=(3,), stride=(2,), padding=(1,))
    assert g.shape == x.shape and g.sum() == y.size


@pytest.mark.parametrize("op", POOL_OPS)
def test_cpu_backward_is_deterministic_and_overwrites(op):
    """Two calls into outputs full of different junk give the same bits."""
    rng = np.random.default_rng(1)
    t = descs(op, (2, 3, 9, 9), {"kernel_size": [3], "stride": [2], "padding": [1]})
    d = create(op, t, kernel_size=[3], stride=[2], padding=[1])
    ins = {n: rng.standard_normal(t[n].shape).astype(np.float32) for n in t if not get_spec(op).role[n].is_output}
    results = []
    for fill in (np.nan, 5.0):
        outs = {r.name: np.full(t[r.name].shape, fill, np.float32) for r in get_spec(op).outputs}
        d.calculate(None, *(outs.get(r.name, ins.get(r.name)) for r in get_spec(op).tensors))
        results.append(next(iter(outs.values())))
    assert np.array_equal(results[0], results[1], equal_nan=False)
    d.destroy()


# -- GPU ----------------------------------------------------------------------------------------------
def _gpu_run(op, case, dtype, seed=0):
    from infiniop_py.testing.run import run_case

    result = run_case(op, case, dtype, "nvidia", seed=seed)
    assert result.ok, "; ".join(result.messages)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [DType.F32, DType.F16], ids=lambda d: d.name)
def test_gpu_gather_fallback_matches_tiled(monkeypatch, dtype):
    """MODE 4 (no shared memory) and MODE 3 give the same bits."""
    import cupy as cp

    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, (2, 5, 9, 11)).astype(np.float32)
    go = rng.standard_normal((2, 5, 5, 6)).astype(np.float32)
    npd = np.float16 if dtype is DType.F16 else np.float32
    outs = []
    monkeypatch.setattr(pc, "FAST_RULES", ())
    for limit in (pc.SMEM_LIMIT, 0):
        monkeypatch.setattr(pc, "SMEM_LIMIT", limit)
        t = {"grad_input": td(x.shape, dtype=dtype), "grad_output": td(go.shape, dtype=dtype), "input": td(x.shape, dtype=dtype)}
        d = create("max_pool_backward", t, "nvidia", kernel_size=[3], stride=[2], padding=[1])
        assert d._kernel.plan.mode == (pc.MAX_BWD_TILED if limit else pc.MAX_BWD_GATHER)
        gi = cp.full(x.shape, np.nan, npd)
        d.calculate(None, gi, cp.asarray(go.astype(npd)), cp.asarray(x.astype(npd)))
        outs.append(cp.asnumpy(gi))
        d.destroy()
    bits = np.uint16 if dtype is DType.F16 else np.uint32
    assert np.array_equal(outs[0].view(bits), outs[1].view(bits))


def _gpu_fast_and_generic(op, shape, attrs, kind, odd, dtype, data, monkeypatch):
    """(fast path result, generic result) on the GPU for one problem, as raw bits; ``odd`` puts
    every tensor one element past a 16-byte boundary."""
    import cupy as cp

    from infiniop_py.dtypes import to_numpy
    from infiniop_py.testing.pool_cases import tensors as pool_tensors

    names = [r.name for r in get_spec(op).tensors]
    tensors = {n: td(*tc.resolved(dtype)[:2], dtype) for n, tc in pool_tensors(op, shape, attrs, kind).items()}
    bits = f"u{np.dtype(to_numpy(dtype)).itemsize}"
    bufs = {}
    for n, t in tensors.items():
        size = sum((d - 1) * st for d, st in zip(t.shape, t.strides)) + 2
        flat = cp.asarray(data(n, size).astype(to_numpy(dtype)).view(bits))
        bufs[n] = flat[1:] if odd else flat
    outs = []
    for rules in (pc.FAST_RULES, ()):
        monkeypatch.setattr(pc, "FAST_RULES", rules)
        d = create(op, tensors, "nvidia", **attrs)
        assert isinstance(d._kernel.plan, pc.FastPlan) == bool(rules), (op, shape, kind)
        bufs[names[0]].fill(0x7FFF)
        ws = cp.empty(d.workspace_size, np.uint8) if d.workspace_size else None
        d.calculate(ws, *(bufs[n] for n in names))
        outs.append(cp.asnumpy(bufs[names[0]]))
        d.destroy()
    return outs


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("dtype", [DType.F32, DType.F16, DType.BF16, DType.F64], ids=lambda d: d.name)
def test_gpu_fast_path_matches_generic(op, dtype, monkeypatch):
    """The fast kernels give the generic kernels' bits on every rule and layout: odd sizes, ceil
    mode, rows and pixels not 16-byte aligned (padded rows, a base one element off), channel
    counts not a multiple of V, ties, NaN and -inf."""
    rng = np.random.default_rng(5)

    def data(name, size):
        x = rng.integers(-3, 4, size).astype(np.float64) if name == "input" else rng.standard_normal(size)
        u = rng.random(size)
        if name == "input" and op.startswith("max"):
            x[u < 0.05] = np.nan
            x[(u >= 0.05) & (u < 0.15)] = -np.inf
        return x

    for k, s, p in pc.FAST_RULES:
        for shape, kind, odd, ceil in (
            ((2, 3, 33, 50), "contiguous", False, False),
            ((2, 3, 31, 47), "contiguous", False, True),
            ((2, 3, 20, 41), "padded", False, False),
            ((2, 3, 20, 64), "contiguous", True, False),
            ((2, 40, 9, 11), "channels_last", False, True),
            ((2, 36, 8, 10), "channels_last", True, False),
        ):
            attrs = {"kernel_size": [k], "stride": [s], "padding": [p], "ceil_mode": ceil}
            fast, generic = _gpu_fast_and_generic(op, shape, attrs, kind, odd, dtype, data, monkeypatch)
            assert np.array_equal(fast, generic), (k, s, p, shape, kind, odd, ceil)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op", POOL_OPS)
def test_gpu_bitwise_deterministic(op):
    """Two calls with the same inputs give the same bits (overlapping windows, ties)."""
    import cupy as cp

    rng = np.random.default_rng(2)
    t = descs(op, (4, 16, 33, 35), {"kernel_size": [3], "stride": [1], "padding": [1]})
    d = create(op, t, "nvidia", kernel_size=[3], stride=[1], padding=[1])
    ins = {
        n: cp.asarray(rng.integers(-3, 4, t[n].shape).astype(np.float32) * 0.37) for n in t if not get_spec(op).role[n].is_output
    }
    res = []
    for _ in range(2):
        outs = {r.name: cp.full(t[r.name].shape, np.nan, np.float32) for r in get_spec(op).outputs}
        ws = cp.empty(d.workspace_size, np.uint8) if d.workspace_size else None
        d.calculate(ws, *(outs.get(r.name, ins.get(r.name)) for r in get_spec(op).tensors))
        res.append(cp.asnumpy(next(iter(outs.values()))))
    assert np.array_equal(res[0].view(np.uint32), res[1].view(np.uint32))
    d.destroy()


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("kind", ["contiguous", "channels_last"])
def test_gpu_target_shape_layouts(op, kind):
    """The benchmark problem at batch 2 (k3 s2 p1 for max, k2 s2 for avg), NCHW and channels-last."""
    from infiniop_py.testing.cases import Case
    from infiniop_py.testing.pool_cases import tensors as pool_tensors

    attrs = {"kernel_size": [3], "stride": [2], "padding": [1]} if op.startswith("max") else {"kernel_size": [2], "stride": [2]}
    tensors = pool_tensors(op, (2, 64, 112, 112), attrs, kind)
    for dtype in (DType.F32, DType.BF16):
        _gpu_run(op, Case(tensors, (dtype,), attrs=attrs), dtype)


# -- upstream-style GGUF files ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["averagepool", "averagepool_backward", "maxpool", "maxpool_backward"])
def test_upstream_pool_files(tmp_path, name):
    """Files laid out as upstream's pooling generators write them (test/upstream_fixtures.py) bind
    in the named-output style (stride absent -> None, dtype from the primary input, length-1
    attribute arrays) and pass on the CPU."""
    import upstream_fixtures as up

    from infiniop_py import cli
    from infiniop_py.gguf import GGUFFile, load_test

    path = str(tmp_path / f"{name}.gguf")
    up.FIXTURES[name](path, np.random.default_rng(0))
    with GGUFFile(path) as f:
        tests = [load_test(f, i) for i in range(f.test_count)]
    op = {"averagepool": "avg_pool", "maxpool": "max_pool"}.get(name.split("_")[0]) + ("_backward" if "backward" in name else "")
    assert {t.spec.name for t in tests} == {op} and {t.style for t in tests} == {"named"}
    out = "output" if "backward" not in name else "grad_input"
    first = "input" if "backward" not in name else "grad_output"
    assert all(t.tensors[out].dtype is t.tensors[first].dtype for t in tests)
    assert {t.tensors[out].dtype for t in tests} == {DType.F32, DType.F16}
    assert tests[2].attrs["stride"] is None and tests[2].attrs["kernel_size"] == (3,)
    assert tests[1].attrs["ceil_mode"] is True and tests[0].attrs["padding"] == (0,)
    assert cli.main([path, "--cpu", "--quiet"]) == 0


def _fake_gpu_plans() -> dict:
    """Creates every case of the four ops on a faked sm_90 device with 132 SMs (no GPU: NVRTC
    and launches replaced), launches each kernel object once with fake pointers, and returns
    {case: [kernel name, grid, block, shared memory, workspace, kernel names outside
    compile_units()]}. Runs in a subprocess: it patches the CUDA runtime module-wide."""
    from infiniop_py.cuda import compiler, runtime

    class Fn:
        num_regs, shared_size_bytes = 64, 0

    requested: list = []

    def record(self, source, names, device_id):
        requested.extend(names)
        self.raw, self.kernels = None, {n: Fn() for n in names}
        self.ptr = {n: i + 1 for i, n in enumerate(names)}

    launches: list = []
    runtime.device_count = lambda: 1
    runtime.properties = lambda device_id=0: {"name": "sm_90", "sm_count": 132, "cc": 90, "max_shared_per_block_optin": 232448}
    compiler.Module.__init__ = record
    compiler._launch_fn = lambda: (
        lambda fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra: launches.append((fn, gx, bx, shmem))
    )
    handle = iop.create_handle("nvidia")
    out = {}
    for op in POOL_OPS:
        allowed = {n for _, ns in get_spec(op).nvidia.compile_units() for n in ns}
        for i, case in enumerate(get_cases(op)):
            for dt in case.dtypes:
                tensors = {
                    n: iop.create_tensor_descriptor(*tc.resolved(dt)[:2], tc.resolved(dt)[2]) for n, tc in case.tensors.items()
                }
                requested.clear()
                launches.clear()
                d = iop.create_descriptor(op, handle, **tensors, **case.attrs)
                d._kernel.launch([1000, 2000, 3000][: len(case.tensors)], 4000, {}, 0)
                names = sorted(set(requested) - allowed)
                fast = isinstance(getattr(d._kernel, "plan", None), pc.FastPlan)
                items = [st.items for st in d._kernel.plan.stages] if fast else []
                ptrs = [list(launch.values) for launch in d._kernel.launches]
                out[f"{op}-{i}-{dt.name}"] = [
                    list(launches),
                    d.workspace_size,
                    names,
                    getattr(d._kernel, "name", ""),
                    items,
                    ptrs,
                ]
                d.destroy()
    return out


def test_nvidia_factories_on_a_fake_device():
    """The NVIDIA backend's Python side on every case: a plan and its launches (none for empty
    tensors) with the tensor and workspace pointers in the kernels' order; generic plans: one
    launch of a planned block size (128-512 threads) and shared memory, workspace 0; fast plans:
    one launch per stage (max_pool_backward: the argmax bytes into the workspace, then the gather
    reading them), workspace only for those bytes; only kernels that compile_units() lists (so the
    NVRTC compile check covers them)."""
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = "import json, sys; sys.path.insert(0, 'test'); from test_pooling import _fake_gpu_plans; print(json.dumps(_fake_gpu_plans()))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(result) == sum(len(c.dtypes) for op in POOL_OPS for c in get_cases(op))
    nfast = 0
    for key, (launches, ws, extra, name, items, ptrs) in result.items():
        op, index, _ = key.rsplit("-", 2)
        case = get_cases(op)[int(index)]
        empty = any(0 in tc.shape for tc in case.tensors.values())
        assert not extra, key
        if empty:
            assert not launches and ws == 0, key
            continue
        if name.startswith("pool_fast_"):
            nfast += 1
            assert [grid for _, grid, _, _ in launches] == [-(-n // pc.FAST_BLOCK) for n in items], key
            assert all(block == pc.FAST_BLOCK and shmem == 0 for _, _, block, shmem in launches), key
            if op == "max_pool_backward":
                assert ws > 0 and ptrs == [[4000, 3000], [1000, 2000, 4000]], key
            else:
                assert ws == 0 and ptrs == [[1000, 2000, 3000][: len(case.tensors)]], key
            continue
        assert ws == 0 and len(launches) == 1, key
        ((_fn, grid, block, shmem),) = launches
        assert block in pc.BLOCKS and 1 <= grid <= 132 * (2048 // block) * 2 and shmem <= pc.SMEM_LIMIT, key
        assert (shmem > 0) == name.startswith("pool_max_backward_tiled"), key
    assert nfast >= len(result) // 4


def _device_problems():
    """(op, descriptors, attributes) of every case of the four tables (f16, f32) and a sweep of
    sizes, windows and layouts."""
    for op in POOL_OPS:
        for case in get_cases(op):
            for dt in set(case.dtypes) & {DType.F16, DType.F32}:
                yield op, {n: td(*tc.resolved(dt)) for n, tc in case.tensors.items()}, case.attrs
    windows = ({"kernel_size": [2], "stride": [2]}, {"kernel_size": [3], "stride": [2], "padding": [1]})
    windows += ({"kernel_size": [3], "stride": [1], "padding": [1]}, {"kernel_size": [5], "stride": [3], "padding": [2]})
    for op, n, c, size, attrs, last in itertools.product(POOL_OPS, (1, 8, 32), (3, 64, 256), (7, 30, 112), windows, (0, 1)):
        shape = (n, c, size, size)
        d = descs(op, shape, attrs)
        if last:  # channels-last: C innermost in every tensor
            d = {
                k: td(v.shape, (v.shape[1] * v.shape[2] * v.shape[3], 1, v.shape[3] * v.shape[1], v.shape[1]))
                for k, v in d.items()
            }
        yield op, d, attrs


def test_plans_on_132_sms_are_the_h100_constants():
    """Tile sizes and grids come from the device's properties: with 132 SMs (threads per SM
    reported as 2048, or not reported) every generic plan and grid equal those of the H100
    figures they replace (132 x 2048 resident threads in the tile-size model, a grid of at most
    132 x (2048 // block) x 2 blocks), over the case tables and a sweep of sizes; with 66 SMs
    some plans differ."""
    from infiniop_py.testing.fake_device import fake_nvidia

    infos = {}

    def plans(props) -> dict:
        out = {}
        with fake_nvidia(**props):
            h = iop.create_handle("nvidia")
            for i, (op, d, attrs) in enumerate(_device_problems()):
                with create_descriptor(op, h, **d, **attrs) as desc:
                    k = desc._kernel
                    if isinstance(getattr(k, "plan", None), pc.Plan):
                        out[i] = (op, k.plan, k.launches[0].grid[0])
                        infos[i] = desc.info
        return out

    h100 = plans({})
    assert len(h100) > 500
    assert plans({"threads_per_sm": 2048}) == h100
    for i, (op, plan, grid) in h100.items():
        info = infos[i]
        names = [r.name for r in get_spec(op).tensors]
        want = pc.plan(info.geom, info[names[0]], [info[n] for n in names[1:]], pc.MODES[op], threads=132 * 2048)
        assert plan == want, op
        assert grid == max(1, min(want.ntiles, 132 * (2048 // want.block) * 2)), op
    half = plans({"sm_count": 66})
    assert sum(half[i][1] != h100[i][1] for i in h100) > 0


# -- benchmark suite ----------------------------------------------------------------------------------
def test_bench_suite_lists_its_cases():
    """infiniop_py/bench/suites/pooling.py: on the GPU the benchmark shapes (max k3 s2 p1, avg k2
    s2, forward and backward, NCHW and channels-last, f32/f16/bf16); on the CPU a smaller NCHW set."""
    from types import SimpleNamespace

    from infiniop_py.bench.suites import pooling

    gpu = pooling.cases(SimpleNamespace(gpu=True))
    assert len(gpu) == 2 * 2 * 3 * 2 and {c.shape for c in gpu} == {(32, 64, 112, 112)}
    assert {c.op for c in gpu} == set(POOL_OPS) and {c.dtype for c in gpu} == {"f32", "f16", "bf16"}
    assert {c.case.split()[-1] for c in gpu} == {"NCHW", "channels-last"}
    assert {c.case for c in gpu if c.op.startswith("max")} >= {"32x64x112x112 k3 s2 p1 NCHW"}
    assert len(pooling.cases(SimpleNamespace(gpu=False))) == 12


def test_bench_suite_runs_on_the_cpu(tmp_path, monkeypatch):
    """The backward cases (the forward ones take the standard path) build, pass their float64
    and torch checks and are timed on the CPU; the bytes-moved metric counts what each must move."""
    import json

    pytest.importorskip("torch")
    from infiniop_py.bench import cli
    from infiniop_py.bench import env as bench_env

    monkeypatch.setattr(bench_env.CpuEnv, "copy_bandwidth", lambda self: {"GBps": 10.0, "how": "test"})
    monkeypatch.setattr(bench_env.CpuEnv, "matrix_rate", lambda self: {"f32": 0.1, "how": "test"})
    out = tmp_path / "run.json"
    args = ["--cpu", "--family", "pooling", "--quick", "--op", "max_pool_backward,avg_pool_backward", "--reps", "3"]
    args += ["--warmup", "1", "--host-calls", "5", "--no-progress", "--no-kernel"]
    assert cli.main(["run", *args, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert sorted(row["op"] for row in rows) == sorted(BWD)
    assert all(row["check"]["ok"] and row["check_ref"]["ok"] for row in rows), rows
    backward = {row["op"]: row["bytes"] for row in rows if row["op"].endswith("backward")}
    assert backward["max_pool_backward"] == 2 * 4 * 16 * 56 * 56 * 4 + 4 * 16 * 28 * 28 * 4  # dx, x, dy
    assert backward["avg_pool_backward"] == 4 * 16 * 56 * 56 * 4 + 4 * 16 * 28 * 28 * 4  # dx, dy
