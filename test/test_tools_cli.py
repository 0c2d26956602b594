"""Command lines of the tools: the profile scripts (test/infiniop/<op>.py), tools/run_profiles.py,
``python -m infiniop_py.bench`` and ``python -m gguf_cases``. Bad input is a usage error (exit 2) with a
message naming what is wrong -- never a traceback, never a run whose numbers are lies -- and an
output path that cannot be written fails before anything runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_profile_common():
    spec = importlib.util.spec_from_file_location("profile_common", ROOT / "test" / "infiniop" / "_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


profile = _load_profile_common()


def _usage_error(capsys, fn, *args) -> str:
    """Run ``fn(*args)``, expecting argparse's usage error: exit 2, message on stderr."""
    with pytest.raises(SystemExit) as e:
        fn(*args)
    assert e.value.code == 2
    return capsys.readouterr().err


def _unwritable(tmp_path) -> Path:
    """A path no one can write to, root included: its parent is a regular file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker / "sub"


# -- profile scripts ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--num_iterations", "-1"], "--num_iterations: expected an integer >= 1, got '-1'"),
        (["--num_iterations", "0"], "--num_iterations: expected an integer >= 1, got '0'"),
        (["--num_iterations", "many"], "--num_iterations: expected an integer, got 'many'"),
        (["--num_prerun", "-1"], "--num_prerun: expected an integer >= 0, got '-1'"),
        (["--nvidia:x"], "bad device id in '--nvidia:x'"),
        (["--nvidia:-1"], "bad device id in '--nvidia:-1'"),
        (["--cpu:1"], "the CPU backend has id 0 only"),
        (["--nv"], "unrecognized arguments: --nv"),
    ],
)
def test_profile_usage_errors(capsys, argv, needle):
    err = _usage_error(capsys, profile.main, "add", argv)
    assert needle in err and "Traceback" not in err


def test_profile_zero_prerun_is_allowed(capsys):
    """``--num_prerun 0`` is valid; times are positive numbers (``--num_iterations 0`` used to
    give ZeroDivisionError on every row and exit 0)."""
    code = profile.main("add", ["--profile", "--num_prerun", "0", "--num_iterations", "2", "--dtypes", "f32"])
    out = capsys.readouterr().out
    assert code == 0
    assert "lib " in out and "profile failed" not in out and " passed, 0 failed" in out


@pytest.mark.parametrize(
    "argv, devices",
    [
        ([], ["cpu"]),
        (["--cpu"], ["cpu"]),
        (["--cpu:0"], ["cpu"]),
        (["--nvidia"], ["nvidia:0"]),
        (["--nvidia:0"], ["nvidia:0"]),
        (["--nvidia:1"], ["nvidia:1"]),
        (["--cpu", "--nvidia:2", "--profile"], ["cpu", "nvidia:2"]),
        (["--nvidia:1", "--nvidia:1"], ["nvidia:1"]),
    ],
)
def test_profile_device_flags(argv, devices):
    """``--nvidia:ID`` (the README's ``--nvidia[:id]``), ``--nvidia`` (GPU 0) and ``--cpu``."""
    args = profile.parse_args("add", argv)
    assert profile._devices(args) == devices
    assert args.profile == ("--profile" in argv)


def test_profile_missing_gpu_is_reported(capsys, monkeypatch):
    """A GPU id that is not there: the script says so and exits 2 (not a usage error)."""
    import infiniop_py as iop

    def no_gpu(device, device_id=None):
        if str(device).startswith("nvidia"):
            raise iop.InfiniopError(f"device {device!r} not available", iop.Status.DEVICE_NOT_FOUND)
        return real(device, device_id)

    real = iop.create_handle
    monkeypatch.setattr(iop, "create_handle", no_gpu)
    assert profile.main("add", ["--nvidia:3", "--dtypes", "f32"]) == 2
    assert "add on nvidia:3: device 'nvidia:3' not available" in capsys.readouterr().out


def test_profile_bad_dtypes(capsys):
    err = _usage_error(capsys, profile.main, "add", ["--dtypes", "f32,bogus"])
    assert "--dtypes: unknown dtype 'bogus'" in err and "f16" in err and "f32" in err and "bf16" in err
    err = _usage_error(capsys, profile.main, "add", ["--dtypes", "bool"])
    assert "--dtypes: add has no bool cases" in err


def test_profile_script_bad_dtype_no_traceback():
    r = subprocess.run(
        [sys.executable, str(ROOT / "test" / "infiniop" / "add.py"), "--dtypes", "bogus"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "unknown dtype 'bogus'" in r.stderr


# -- tools/run_profiles.py -------------------------------------------------------------------------
def test_run_profiles_rejects_bad_counts_and_paths(capsys, tmp_path):
    from tools import run_profiles

    err = _usage_error(capsys, run_profiles.main, ["--out-dir", str(tmp_path), "--num_iterations", "0", "add"])
    assert "--num_iterations: expected an integer >= 1" in err
    err = _usage_error(capsys, run_profiles.main, ["--out-dir", str(tmp_path), "--num_prerun", "-2", "add"])
    assert "--num_prerun: expected an integer >= 0" in err
    bad = _unwritable(tmp_path)
    assert run_profiles.main(["--out-dir", str(bad), "add"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write to --out-dir {bad}" in err and "Traceback" not in err


# -- python -m infiniop_py.bench -------------------------------------------------------------------------
BENCH_ONE = ["--cpu", "--suite", "elementwise", "--ops", "add", "--dtypes", "f32", "--match", "1024 "]


def test_bench_without_gpu_is_a_clear_error(capsys, monkeypatch):
    from infiniop_py.bench import __main__ as bench
    from infiniop_py.bench import env

    def no_gpu(self, device_id=0):
        raise RuntimeError("torch sees no CUDA device")

    monkeypatch.setattr(env.GpuEnv, "__init__", no_gpu)
    assert bench.main(["--quick"]) == 2
    err = capsys.readouterr().err
    assert "no usable GPU (torch sees no CUDA device)" in err and "--cpu" in err


def test_bench_without_gpu_subprocess():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the benchmark would run")
    r = subprocess.run(
        [sys.executable, "-m", "infiniop_py.bench", "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "no usable GPU" in r.stderr and "--cpu" in r.stderr


def test_bench_json_unwritable_fails_before_the_run(capsys, tmp_path):
    from infiniop_py.bench import __main__ as bench

    bad = _unwritable(tmp_path) / "out.json"
    assert bench.main([*BENCH_ONE, "--json", str(bad)]) == 2
    captured = capsys.readouterr()
    assert f"cannot write --json {bad}" in captured.err
    assert "copy bandwidth" not in captured.out  # nothing was measured
    assert bench.main([*BENCH_ONE, "--json", str(tmp_path)]) == 2
    assert f"cannot write --json {tmp_path}: it is a directory" in capsys.readouterr().err
    assert bench.main([*BENCH_ONE, "--out-dir", str(_unwritable(tmp_path))]) == 2
    assert "cannot write json output" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--reps", "0"], ["--reps", "-3"], ["--warmup", "-1"], ["--host-calls", "0"]])
def test_bench_bad_counts(capsys, argv):
    from infiniop_py.bench import __main__ as bench

    err = _usage_error(capsys, bench.main, [*BENCH_ONE, *argv])
    assert f"argument {argv[0]}: expected an integer >=" in err


# -- python -m gguf_cases --------------------------------------------------------------------------
def test_gguf_cases_unwritable_out(capsys, tmp_path):
    from gguf_cases.__main__ import main

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for out, why in ((blocker / "sub", "Not a directory"), (blocker, "it is not a directory")):
        assert main(["add", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == f"python -m gguf_cases: error: cannot write to --out {out}: {why}\n"
    assert not list(tmp_path.rglob("*.gguf"))


def test_gguf_cases_unwritable_out_subprocess(tmp_path):
    bad = _unwritable(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "gguf_cases", "add", "--out", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and str(bad) in r.stderr
