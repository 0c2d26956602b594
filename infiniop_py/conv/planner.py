"""The planning machinery of the conv family: the kernel object a plan builds, building the
first buildable config of a rule table's order, pinned and measured plans, and the one-stage
``Planner`` of conv and conv_transpose (conv_backward's two-stage planner is its own).
"""

from __future__ import annotations

from infiniop_py.cuda.kernel import CudaKernel
from infiniop_py.planner import first_match, matching
from infiniop_py.status import InfiniopError, Status, error

from .cudnn_plans import Cudnn
from .kernels import SOURCE, IGemm
from .problem import GPU_DTYPES, Conv, device_sms, forward_problem, key


# -- the kernel object ----------------------------------------------------------------------
class ConvKernel(CudaKernel):
    """Runs a plan's launches in order. ``plan_name`` is what ``desc.plan`` reports."""

    def __init__(self, handle, launches, workspace_size: int, plan_name: str):
        super().__init__(handle)
        self.launches = tuple(launches)
        self.workspace_size = workspace_size
        self.plan_name = plan_name
        if len(self.launches) == 1:
            self.one = self.launches[0]
            self.launch = self._launch_one
        elif not self.launches:
            self.launch = self._launch_none

    def _launch_one(self, ptrs, ws_ptr, rt, stream):
        self.one(ptrs, ws_ptr, stream)

    def _launch_none(self, ptrs, ws_ptr, rt, stream):
        return None

    def launch(self, ptrs, ws_ptr, rt, stream):
        for k in self.launches:
            k(ptrs, ws_ptr, stream)


# -- planning -------------------------------------------------------------------------------
MEASURE = "measure"  # the plan attribute's value that asks for a create-time measurement


def factory(cfg, c, handle):
    """A zero-argument callable that builds config ``cfg``'s kernel for problem ``c``."""

    def make():
        launches, ws = cfg.build(c, handle.device_id)
        return ConvKernel(handle, launches, ws, cfg.name)

    return make


def first_buildable(op: str, ordered: list[str], build):
    """``build(name)`` for the first name that builds; a cuDNN config that declines the problem
    (NOT_IMPLEMENTED) passes to the next. Our kernels always build (the last rule of a table)."""
    last = None
    for name in ordered:
        try:
            return name, build(name)
        except InfiniopError as exc:
            if exc.status != Status.NOT_IMPLEMENTED:
                raise
            last = exc
    raise error(Status.INTERNAL_ERROR, f"{op}: no plan could be built ({last})")


def pinned_kernel(op: str, pinned: str, candidates):
    """The kernel of a pinned plan name: BAD_PARAM where no candidate of that name can run the
    problem (or cuDNN declines it)."""
    table = dict(candidates)
    if pinned not in table:
        raise error(Status.BAD_PARAM, f"{op}: attribute 'plan'={pinned!r} cannot run this problem (candidates: {list(table)})")
    try:
        return table[pinned]()
    except InfiniopError as exc:
        if exc.status != Status.NOT_IMPLEMENTED:
            raise
        raise error(Status.BAD_PARAM, f"{op}: attribute 'plan'={pinned!r} cannot run this problem: {exc}") from exc


def measured_kernel(key, candidates, descs, device_id: int):
    """Builds every candidate, times each once on scratch buffers (``autotune.choose``, cached
    per key and device) and returns the fastest's kernel; None where the autotune helper is
    not installed. Candidates that fail to build are left out."""
    try:
        from infiniop_py.cuda import autotune, runtime
    except ImportError:
        return None
    built = []
    for name, make in candidates:
        try:
            built.append((name, make()))
        except InfiniopError as exc:
            if exc.status != Status.NOT_IMPLEMENTED:
                raise
    if not built:
        return None
    if len(built) == 1:
        return built[0][1]
    cp = runtime.cupy()
    with cp.cuda.Device(device_id):
        scratch = [None if d is None else cp.full(max(d.span_bytes, 1), 0x3C, dtype=cp.uint8) for d in descs]
        ptrs = [0 if b is None else int(b.data.ptr) for b in scratch]
        ws = cp.empty(max(max(k.workspace_size for _, k in built), 1), dtype=cp.uint8)
        ws_ptr = int(ws.data.ptr)

        def runner(kernel):
            return lambda stream: kernel.launch(ptrs, ws_ptr, (), stream)

        winner = autotune.choose(key, [(n, runner(k)) for n, k in built], device_id=device_id)
        cp.cuda.Device(device_id).synchronize()
    return dict(built)[winner]


class Planner:
    """Rule table + candidates of an operator with one stage (y from x, w, b)."""

    def __init__(self, op: str, configs: dict, rules, transposed: bool):
        self.op, self.configs, self.rules, self.transposed = op, configs, rules, transposed

    def names(self) -> list[str]:
        """Every plan name the backend can report or be pinned to."""
        return [*self.configs, "empty", MEASURE]

    def problem(self, info, sm_count: int) -> Conv:
        return forward_problem(info, self.transposed, sm_count)

    def candidates(self, info, handle) -> list[tuple[str, object]]:
        """Every config that can run this problem, as (name, factory() -> kernel)."""
        c = self.problem(info, device_sms(handle))
        return [(name, factory(cfg, c, handle)) for name, cfg in self.configs.items() if cfg.applies(c)]

    def planned(self, info, sm_count: int) -> tuple[str, list[str]]:
        """The rule table's plan for this problem on a device of ``sm_count`` SMs and the
        kernels it launches (cuDNN counts as available only where it loads; no GPU needed
        otherwise)."""
        c = self.problem(info, sm_count)
        if info["y"].numel == 0:
            return "empty", []
        name = first_match(self.rules, c)[1]
        return name, self.configs[name].kernel_names(c)

    def create(self, info, handle):
        if info["y"].numel == 0:
            return ConvKernel(handle, [], 0, "empty")
        c = self.problem(info, device_sms(handle))
        pinned = info.attrs.get("plan")
        cands = [(name, factory(cfg, c, handle)) for name, cfg in self.configs.items() if cfg.applies(c)]
        if pinned == MEASURE:
            descs = [info[n] for n in ("y", "x", "w", "b")]
            kernel = measured_kernel(key(self.op, c), cands, descs, handle.device_id)
            if kernel is not None:
                return kernel
        elif pinned is not None:
            return pinned_kernel(self.op, pinned, cands)
        table = dict(cands)
        return first_buildable(self.op, matching(self.rules, c), lambda name: table[name]())[1]

    def compile_units(self):
        names = []
        for dt in GPU_DTYPES:
            for cfg in self.configs.values():
                if isinstance(cfg, Cudnn) or (isinstance(cfg, IGemm) and not cfg.applies_dtype(dt)):
                    continue
                names += cfg.names(dt)
        return [(SOURCE, names)]
