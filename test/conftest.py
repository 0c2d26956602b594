"""Shared fixtures: devices (the NVIDIA ones skip cleanly where there is no GPU or CuPy)."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def gpu_available() -> bool:
    from infiniop_py.cuda import runtime

    return runtime.available()


requires_gpu = pytest.mark.skipif(not gpu_available(), reason="needs an NVIDIA GPU with CuPy")


def cupy_with_env(monkeypatch, env: dict):
    """CuPy, after skipping the test when there is no GPU and setting the tuning switches ``env``
    (environment variables read at descriptor create)."""
    if not gpu_available():
        pytest.skip("needs an NVIDIA GPU with CuPy")
    import cupy

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return cupy


def status_of(fn):
    """The status of the InfiniopError ``fn()`` raises (the test fails if it raises none)."""
    import infiniop_py as iop

    with pytest.raises(iop.InfiniopError) as ei:
        fn()
    return ei.value.status


def create_status(op: str, handle, *args, **kwargs):
    """The status with which ``create_descriptor(op, handle, *args, **kwargs)`` refuses."""
    import infiniop_py as iop

    return status_of(lambda: iop.create_descriptor(op, handle, *args, **kwargs))


DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("nvidia", id="nvidia", marks=[requires_gpu, pytest.mark.gpu]),
]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture
def cpu_handle():
    import infiniop_py as iop

    return iop.create_handle("cpu")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "sanitize: the small per-operator subset tools/sanitize.sh runs under compute-sanitizer (IOP_SANITIZE=1)"
    )


@pytest.fixture(scope="session", autouse=True)
def _sanitizer_allocator():
    """Under IOP_SANITIZE=1 (tools/sanitize.sh) every CuPy buffer is its own cudaMalloc, not a
    slice of a pooled block, so memcheck sees the bounds of each tensor."""
    if os.environ.get("IOP_SANITIZE") == "1" and gpu_available():
        import cupy

        cupy.cuda.set_allocator(None)
    yield


def pytest_report_header(config):
    return (
        f"infiniop_py devices: cpu{' nvidia' if gpu_available() else ''} (INFINIOP_FULL={os.environ.get('INFINIOP_FULL', '0')})"
    )


@pytest.fixture
def fake_nvidia():
    """A fake sm_90 device (infiniop_py.testing.fake_device) whose module loader records the
    kernel names a planner asks for (nothing is compiled or launched): yields that list."""
    from infiniop_py.testing.fake_device import fake_nvidia as fake

    with fake() as requested:
        yield requested
