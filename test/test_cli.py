"""The ``infiniop-test`` runner (gguf.md §4): output, statuses, comparison, exit codes, JSON."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import test_gguf_helpers
from test_gguf_helpers import scale_record, write_one

from infiniop_py import cli
from infiniop_py.dtypes import DType
from infiniop_py.gguf import TestRecord
from infiniop_py.gguf.runner import Device

SEP = "=" * 37
X = np.array([1.0, 2.0, 3.0, 4.0], np.float32)

fake_ops = test_gguf_helpers.fake_ops  # the fixture, registered for this module


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, tmp_path, *argv):
    path = tmp_path / "result.json"
    code, out, err = run(capsys, *argv, "--json", path)
    return code, out, json.loads(path.read_text())


# -- the basic pass -----------------------------------------------------------------------------
def test_block_format(tmp_path, capsys, fake_ops):
    rec = scale_record(X, 0.5 * X.astype(np.float64), scale=0.5, description=("halves", "str"))
    path = write_one(tmp_path / "s.gguf", rec, description="scale file")
    code, out, err = run(capsys, path, "--verbose")
    assert code == 0 and err == ""
    assert out == "\n".join(
        [
            path,
            "scale file",
            "Found 1 tests",
            SEP,
            "Status: PASS",
            "Description: fake_scale (test 0: halves)",
            "- y: Shape: [4], Strides: [1], Type: F32",
            "- x: Shape: [4], Strides: [1], Type: F32",
            "- scale=0.5",
            "- count=1",
            "- flag=false",
            "- dims=[]",
            "- mode=none",
            "- shift=0.0",
            "- rtol=1.00e-05, atol=1.00e-05",
            "Time: N/A",
            "",
            SEP,
            "All tests passed",
            "",
        ]
    )


def test_f32_attribute_printed_at_stored_precision(tmp_path, capsys, fake_ops):
    path = write_one(tmp_path / "s.gguf", scale_record(X, 1e-5 * X.astype(np.float64), scale=1e-5))
    code, out, _ = run(capsys, path, "--atol", "1", "--verbose")
    assert "- scale=1e-05\n" in out and code == 0


def test_alias_op_name_description(tmp_path, capsys, fake_ops):
    path = write_one(tmp_path / "a.gguf", scale_record(X, X.astype(np.float64), op="fake_alias"))
    code, out, _ = run(capsys, path, "--verbose")
    assert code == 0 and "Description: fake_alias (as fake_scale) (test 0)" in out


def test_timing(tmp_path, capsys, fake_ops):
    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))
    code, out, data = run_json(capsys, tmp_path, path, "--run", "3", "--warmup=2", "--verbose")
    line = next(ln for ln in out.splitlines() if ln.startswith("Time:"))
    assert line.endswith(" us") and len(line.split()[1].split(".")[1]) == 3
    assert data["files"][0]["tests"][0]["time_us"] > 0 and data["warmup"] == 2 and data["run"] == 3


# -- statuses and exit codes ----------------------------------------------------------------------
def _simple(op, x=X, ans=None, out_dtype=DType.F32, **kw):
    rec = TestRecord(op)
    rec.add_output("y", x.shape, kw.get("out_strides"), out_dtype)
    rec.add_input("x", x, DType(kw.get("in_dtype", out_dtype)))
    rec.add_expected("ans", x.astype(np.float64) if ans is None else ans)
    return rec


def test_statuses_and_exit_codes(tmp_path, capsys, fake_ops):
    recs = [
        scale_record(X, X.astype(np.float64)),  # PASS
        scale_record(X, X.astype(np.float64) + 1),  # WRONG ANSWER
        _simple("fake_bad"),  # OP CREATION FAILED
        _simple("fake_raise"),  # EXECUTION FAILED
        _simple("no_such_op"),  # INVALID TEST
        _simple("fake_nocpu"),  # SKIPPED
    ]
    path = write_one(tmp_path / "mix.gguf", *recs)
    code, out, data = run_json(capsys, tmp_path, path)
    statuses = [t["status"] for t in data["files"][0]["tests"]]
    assert statuses == ["PASS", "WRONG ANSWER", "OP CREATION FAILED", "EXECUTION FAILED", "INVALID TEST", "SKIPPED"]
    assert code == 1 and data["summary"] == {
        "selected": 6,
        "passed": 1,
        "failed": 4,
        "skipped": 1,
        "ill_defined": 0,
        "file_errors": 0,
        "exit_code": 1,
    }
    assert "Error: unknown op_name 'no_such_op'" in out
    assert "Error: InternalError: fake_raise: CPU backend failed: ZeroDivisionError: deliberate failure" in out
    assert "BadParam: fake_bad: always rejected (BAD_PARAM)" in out
    assert f"{path}: 6 tests, 4 of 6 tests failed, 1 skipped\nSkipped 1 tests:\n  test 5 fake_nocpu: NotImplementedStatus" in out
    assert "Traceback" not in out and "Status: PASS" not in out  # every block but the passing one
    code, out, _ = run(capsys, path, "--verbose")
    assert "4 of 6 tests failed\nSkipped 1 tests:\n  test 5 fake_nocpu: NotImplementedStatus" in out
    assert out.count("\nStatus: ") == 6


def test_skipped_only_is_success(tmp_path, capsys, fake_ops):
    code, out, _ = run(capsys, write_one(tmp_path / "s.gguf", _simple("fake_nocpu")))
    assert code == 0 and "Status: SKIPPED" in out and "1 tests, All tests passed, 1 skipped\nSkipped 1 tests:" in out


def test_file_error_wins_over_failures(tmp_path, capsys, fake_ops):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x01\x00\x00\x00")
    failing = write_one(tmp_path / "f.gguf", scale_record(X, X + 1.0))
    path = tmp_path / "result.json"
    code, out, err = run(capsys, failing, bad, "--json", path)
    data = json.loads(path.read_text())
    assert code == 2
    assert f"{bad}\nError: {bad}: GGUF version 1 is not supported" in err and str(bad) not in out  # stderr only
    assert "Total: 1 of 1 tests failed in 2 files (0 skipped, 0 ill-defined, 1 file errors)" in out
    assert data["files"][1]["error"].startswith("GGUF version 1") and data["summary"]["exit_code"] == 2


def test_interrupt(tmp_path, capsys, fake_ops, monkeypatch):
    from infiniop_py.gguf import runner

    real = runner.run_test
    calls = []

    def flaky(f, i, device, opts):
        calls.append(i)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(f, i, device, opts)

    monkeypatch.setattr(runner, "run_test", flaky)
    path = write_one(tmp_path / "s.gguf", *[scale_record(X, X.astype(np.float64))] * 3)
    code, out, data = run_json(capsys, tmp_path, path, path)
    assert code == 130 and "Total: 0 of 1 tests failed in 1 files" in out and "All tests passed" not in out
    assert f"{path}: 3 tests, Interrupted after 1 of 3 tests (1 passed, 0 failed)\n" in out
    assert data["summary"]["exit_code"] == 130 and len(data["files"][0]["tests"]) == 1


def test_interrupt_outside_a_test(tmp_path, capsys, fake_ops, monkeypatch):
    """Ctrl-C while a file is being opened (no test running): still 'Interrupted', exit 130."""
    from infiniop_py.gguf import container

    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))
    real = container.GGUFFile.__init__
    opened = []

    def open_then_interrupt(self, *a, **kw):
        opened.append(1)
        if len(opened) == 2:
            raise KeyboardInterrupt
        real(self, *a, **kw)

    monkeypatch.setattr(container.GGUFFile, "__init__", open_then_interrupt)
    code, out, data = run_json(capsys, tmp_path, path, path, "--verbose")
    assert code == 130 and out.count("All tests passed") == 1  # the first file's, complete
    assert "Interrupted after 1 tests\nTotal: 0 of 1 tests failed in 2 files" in out
    assert data["summary"]["exit_code"] == 130


@pytest.mark.parametrize(
    "argv,message",
    [
        ([], "no test file"),
        (["x.gguf", "--bogus"], "unknown option '--bogus'"),
        (["x.gguf", "--run", "1.5"], "--run expects a non-negative integer"),
        (["x.gguf", "--warmup=-1"], "--warmup expects a non-negative integer"),
        (["x.gguf", "--atol", "nan"], "--atol expects a finite number"),
        (["x.gguf", "--rtol", "abc"], "--rtol expects a number"),
        (["x.gguf", "--run"], "option --run needs a value"),
        (["x.gguf", "--cpu", "--nvidia"], "conflicting device flags"),
        (["x.gguf", "--nvidia:0", "--nvidia:1"], "conflicting device flags"),
        (["x.gguf", "--cpu:1"], "device 'cpu:1' does not exist"),
        (["x.gguf", "--ascend"], "device 'ascend' is not supported by this build"),
        (["x.gguf", "--kunlun:2"], "device 'kunlun' is not supported by this build"),
        (["x.gguf", "--nvidia:x"], "bad device id"),
    ],
)
def test_usage_errors(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and f"infiniop-test: {message}" in err and "usage:" in err


def test_help(capsys):
    code, out, err = run(capsys, "--help")
    assert code == 0 and out.startswith("usage: infiniop-test") and "--fail-fast" in out


def test_options_anywhere_and_equals(tmp_path, capsys, fake_ops):
    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))
    code, out, _ = run(capsys, "--cpu:0", "--atol=0.5", path, "--rtol", "0", "--cpu", "--verbose")
    assert code == 0 and "- rtol=0.00e+00, atol=5.00e-01" in out


def test_unavailable_nvidia(capsys, monkeypatch):
    from infiniop_py.cuda import runtime

    class FakeCupy:
        pass

    monkeypatch.setattr(runtime, "_cupy", lambda: FakeCupy())
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    code, out, err = run(capsys, "x.gguf", "--nvidia:3")
    assert code == 2 and "infiniop-test: device 'nvidia:3' not available: 1 GPU visible" in err
    monkeypatch.setattr(runtime, "_cupy", lambda: ImportError("No module named 'cupy'"))
    code, out, err = run(capsys, "x.gguf", "--nvidia")
    assert code == 2 and "device 'nvidia:0' not available: CuPy is not importable" in err


# -- comparison, tolerances, poison ---------------------------------------------------------------
def _tol_case(**keys):
    return scale_record(X, X.astype(np.float64) * (1 + 1e-3), **keys)  # 1e-3 relative error


@pytest.mark.parametrize(
    "keys,argv,status,tol",
    [
        ({}, [], "WRONG ANSWER", (1e-5, 1e-5)),  # F32 defaults
        ({"rtol": (1e-2, "f64")}, [], "PASS", (1e-5, 1e-2)),  # the case's rtol
        ({"rtol": (1e-2, "f64")}, ["--rtol", "0"], "WRONG ANSWER", (1e-5, 0.0)),  # command line wins
        ({"atol": (1, "f32")}, ["--atol", "0"], "WRONG ANSWER", (0.0, 1e-5)),
        ({"atol": (0, "i32")}, ["--rtol", "0.01"], "PASS", (0.0, 1e-2)),  # each resolved separately
    ],
)
def test_tolerance_precedence(tmp_path, capsys, fake_ops, keys, argv, status, tol):
    path = write_one(tmp_path / "t.gguf", _tol_case(**keys))
    code, out, data = run_json(capsys, tmp_path, path, *argv, "--verbose")
    t = data["files"][0]["tests"][0]
    assert t["status"] == status and (t["atol"], t["rtol"]) == tol
    assert f"- rtol={tol[1]:.2e}, atol={tol[0]:.2e}" in out


def test_default_tolerance_per_output_dtype(tmp_path, capsys, fake_ops):
    recs = [_simple("fake_scale", X.astype(dt), out_dtype=d) for dt, d in ((np.float16, DType.F16), (np.float64, DType.F64))]
    for r in recs:
        r.set("scale", 1.0, "f32")
    code, out, data = run_json(capsys, tmp_path, write_one(tmp_path / "d.gguf", *recs))
    got = [(t["atol"], t["rtol"]) for t in data["files"][0]["tests"]]
    assert code == 0 and got == [(1.5e-3, 1e-3), (1e-10, 1e-10)]


def test_exact_outputs_ignore_tolerance_overrides(tmp_path, capsys, fake_ops):
    rec = TestRecord("fake_two")
    rec.add_output("y", (4,), None, DType.F32)
    rec.add_output("idx", (4,), None, DType.I32)
    rec.add_input("x", X, DType.F32)
    rec.add_expected("ans_y", X)
    rec.add_expected("ans_idx", np.array([0, 1, 2, 4]), DType.I64)  # one off by one
    path = write_one(tmp_path / "two.gguf", rec)
    code, out, data = run_json(capsys, tmp_path, path, "--atol", "100", "--rtol", "100")
    assert code == 1 and "- rtol=1.00e+02, atol=1.00e+02 (y)\n- exact comparison (idx)" in out
    assert "idx: 1 of 4 values failed; first at index 3 [3]: actual 3, expected 4" in out
    t = data["files"][0]["tests"][0]
    assert t["mismatches"] == 1 and t["max_abs_err"] == 1.0


@pytest.mark.parametrize(
    "x,ans,argv,ok",
    [
        ([1.0, 2.0], [1.0, np.nan], ["--atol", "1e9", "--rtol", "1e9"], False),  # expected NaN, actual finite
        ([np.nan, 2.0], [np.nan, 2.0], [], True),  # NaN against NaN
        ([np.inf, 2.0], [1e30, 2.0], ["--rtol", "1"], False),  # Inf against finite with rtol > 0
        ([np.inf, -np.inf], [np.inf, -np.inf], [], True),
        ([np.inf, 2.0], [-np.inf, 2.0], ["--atol", "1e9", "--rtol", "1e9"], False),
    ],
)
def test_non_finite_values(tmp_path, capsys, fake_ops, x, ans, argv, ok):
    rec = scale_record(np.array(x, np.float32), np.array(ans))
    code, out, data = run_json(capsys, tmp_path, write_one(tmp_path / "n.gguf", rec), *argv)
    assert (code == 0) == ok
    if not ok:
        assert data["files"][0]["tests"][0]["status"] == "WRONG ANSWER"
    assert "NaN" not in json.dumps(data) and "Infinity" not in json.dumps(data)


@pytest.mark.parametrize(
    "dtype,ans,needle",
    [
        (DType.F32, np.arange(4.0), "actual nan, expected 0"),
        (DType.I32, np.arange(4), "values failed"),
        (DType.BOOL, np.zeros(4, bool), "not a valid bool byte"),
    ],
)
def test_poison_catches_unwritten_outputs(tmp_path, capsys, fake_ops, dtype, ans, needle):
    x = np.arange(4).astype({DType.F32: np.float32, DType.I32: np.int32, DType.BOOL: np.bool_}[dtype])
    rec = _simple("fake_nowrite", x, ans=ans, out_dtype=dtype)
    code, out, _ = run(capsys, write_one(tmp_path / "p.gguf", rec), "--atol", "1e30", "--rtol", "1e30")
    assert code == 1 and "Status: WRONG ANSWER" in out and needle in out


def test_poison_catches_out_of_view_writes(tmp_path, capsys, fake_ops):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    padded = _simple("fake_spill", x, out_strides=(6, 1))
    dense = _simple("fake_spill", x)
    code, out, data = run_json(capsys, tmp_path, write_one(tmp_path / "g.gguf", padded, dense))
    assert code == 1
    assert [t["status"] for t in data["files"][0]["tests"]] == ["WRONG ANSWER", "PASS"]
    assert "Error: y: wrote 4 elements outside the output view" in out  # 2 gap elements x 2 rows


def test_workspace_is_poisoned(tmp_path, capsys, fake_ops):
    x = np.zeros(8, np.int8)
    rec = _simple("fake_ws", x, ans=np.full(8, np.int8(-91)), out_dtype=DType.I8)  # 0xA5
    code, out, _ = run(capsys, write_one(tmp_path / "w.gguf", rec))
    assert code == 0, out


def test_index_with_ties(tmp_path, capsys, fake_ops):
    data = np.array([1.0, 5.0, 5.0, 2.0], np.float32)  # argmax picks 1

    def rec(ans):
        r = TestRecord("fake_index")
        r.add_output("result", (), (), DType.I64)
        r.add_input("data", data, DType.F32)
        r.add_expected("ans", np.array(ans), DType.I64)
        return r

    code, out, js = run_json(capsys, tmp_path, write_one(tmp_path / "i.gguf", rec(1), rec(2), rec(3)))
    assert [t["status"] for t in js["files"][0]["tests"]] == ["PASS", "PASS", "WRONG ANSWER"]
    assert "- index comparison" in out and js["files"][0]["tests"][0]["atol"] is None


def test_inplace(tmp_path, capsys, fake_ops):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    rec = TestRecord("fake_scale")
    rec.set("scale", 2.0, "f32")
    rec.add_output("y", (3, 4), (6, 1), DType.F32, inplace="x")
    rec.add_input("x", x, DType.F32, (6, 1))
    rec.add_expected("ans", 2.0 * x)
    code, out, _ = run(capsys, write_one(tmp_path / "ip.gguf", rec), "--verbose")
    assert code == 0 and "- y: Shape: [3, 4], Strides: [6, 1], Type: F32 (in-place on x)" in out


def test_inout_starts_from_init_or_data(tmp_path, capsys, fake_ops):
    x = np.arange(3, dtype=np.float32)
    recs = []
    for data, expect in ((None, x + 2.0), (np.full(3, 7.0, np.float32), x + 7.0)):
        r = TestRecord("fake_acc")
        if data is None:
            r.add_output("acc", (3,), None, DType.F32)  # placeholder: TensorRole.init = 2
        else:
            r.add_inout("acc", data, DType.F32)
        r.add_input("x", x, DType.F32)
        r.add_expected("ans", expect)
        recs.append(r)
    code, out, _ = run(capsys, write_one(tmp_path / "acc.gguf", *recs))
    assert code == 0, out


# -- selection, paths, modes ---------------------------------------------------------------------
def _two_files(tmp_path, fake_ops):
    d = tmp_path / "dir"
    d.mkdir()
    (d / "sub").mkdir()
    good = [scale_record(X, X.astype(np.float64), description=(f"case {i}", "str")) for i in range(3)]
    bad = scale_record(X, X + 1.0, description=("Broken ONE", "str"))
    write_one(d / "b.gguf", *good, description="second file")
    write_one(d / "a.gguf", good[0], bad, description="first file")
    write_one(d / "sub" / "c.gguf", bad)  # not recursive
    (d / "notes.txt").write_text("ignored")
    return d


def test_directory_and_k(tmp_path, capsys, fake_ops):
    d = _two_files(tmp_path, fake_ops)
    code, out, data = run_json(capsys, tmp_path, d)
    assert [f["path"] for f in data["files"]] == [os.path.join(str(d), "a.gguf"), os.path.join(str(d), "b.gguf")]
    assert code == 1 and "Total: 1 of 5 tests failed in 2 files (0 skipped, 0 ill-defined, 0 file errors)" in out

    code, out, data = run_json(capsys, tmp_path, d, "-k", "broken one", "--verbose")
    assert code == 1 and "Found 2 tests (1 selected)" in out and "Found 3 tests (0 selected)" in out
    assert data["summary"]["selected"] == 1
    code, out, data = run_json(capsys, tmp_path, d, "-kCASE 2", "-k", "FIRST FILE")
    assert code == 1 and data["summary"]["selected"] == 3  # a.gguf by its description, b's case 2
    code, out, data = run_json(capsys, tmp_path, d, "-k=fake_scale")
    assert data["summary"]["selected"] == 5


def test_empty_and_missing_paths(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    path = tmp_path / "result.json"
    code, out, err = run(capsys, tmp_path / "empty", tmp_path / "missing.gguf", "--json", path)
    data = json.loads(path.read_text())
    assert code == 2 and "Error" not in out
    assert f"Error: {tmp_path / 'empty'}: no *.gguf files in directory" in err
    assert f"Error: {tmp_path / 'missing.gguf'}: no such file or directory" in err
    assert data["summary"]["file_errors"] == 2


def test_fail_fast_and_quiet(tmp_path, capsys, fake_ops):
    d = _two_files(tmp_path, fake_ops)
    code, out, data = run_json(capsys, tmp_path, d, "--fail-fast")
    assert code == 1 and len(data["files"]) == 1 and len(data["files"][0]["tests"]) == 2
    assert "Stopped after the first failure (--fail-fast)" in out
    code, out, _ = run(capsys, d, "--quiet")
    assert out.count("Status:") == 1 and "Status: WRONG ANSWER" in out and "Found" not in out
    assert out.count("All tests passed") == 1 and "1 of 2 tests failed" in out


def test_json_schema(tmp_path, capsys, fake_ops):
    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))
    code, out, data = run_json(capsys, tmp_path, path, "--atol", "0.1")
    assert set(data) == {"schema", "device", "warmup", "run", "atol", "rtol", "files", "summary"}
    assert (data["schema"], data["device"], data["atol"], data["rtol"]) == (1, "cpu", 0.1, None)
    f = data["files"][0]
    assert set(f) == {"path", "error", "test_count", "tests"} and f["test_count"] == 1
    t = f["tests"][0]
    assert set(t) == {"index", "op_name", "status", "time_us", "atol", "rtol", "max_abs_err", "mismatches", "error"}
    assert t["time_us"] is None and t["error"] is None and t["max_abs_err"] == 0.0 and t["mismatches"] == 0


# -- ill-defined tests -----------------------------------------------------------------------------
def test_ill_defined(tmp_path, capsys, fake_ops):
    """Self-overlapping outputs, and inputs whose stored data differs where their layout overlaps,
    are ILL-DEFINED: counted apart, listed with the reason, exit 0 unless --strict."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    agree = np.array([[0, 1, 2], [1, 2, 3]], np.float32)  # x[i, j] = i + j: consistent at strides (1, 1)
    recs = [
        scale_record(x, x.astype(np.float64)),
        scale_record(x, x.astype(np.float64), out_strides=(2, 1)),  # output overlaps: 2i + j, j < 4
        scale_record(agree + np.array([[0], [5]], np.float32), agree.astype(np.float64) + [[0], [5]], strides=(1, 1)),
        scale_record(agree, agree.astype(np.float64), strides=(1, 1)),  # input overlaps, data agrees: runs
    ]
    path = write_one(tmp_path / "ill.gguf", *recs)
    code, out, data = run_json(capsys, tmp_path, path)
    assert [t["status"] for t in data["files"][0]["tests"]] == ["PASS", "ILL-DEFINED", "ILL-DEFINED", "PASS"], out
    assert code == 0 and data["summary"]["ill_defined"] == 2 and data["summary"]["failed"] == 0
    assert data["summary"]["passed"] == 2 and data["summary"]["exit_code"] == 0
    assert out.count("Status: ILL-DEFINED") == 2 and "OP CREATION FAILED" not in out and "All tests passed" not in out
    assert "Error: output 'y' (shape [3, 4], strides [2, 1]) overlaps itself: two logical elements share memory" in out
    assert "input 'x' (shape [2, 3], strides [1, 1]) overlaps itself and its stored values differ at 2 shared" in out
    assert f"{path}: 4 tests, 2 passed, 0 failed, 2 ill-defined\nIll-defined 2 tests:\n  test 1 fake_scale: output 'y'" in out
    assert data["files"][0]["tests"][1]["error"].startswith("output 'y' (shape [3, 4], strides [2, 1]) overlaps")

    code, out, data = run_json(capsys, tmp_path, path, "--strict", "--verbose")
    assert code == 1 and data["summary"]["failed"] == 2 and data["summary"]["ill_defined"] == 2
    assert "\n2 of 4 tests failed (2 ill-defined)\nIll-defined 2 tests:" in out
    code, out, _ = run(capsys, path, path, "--quiet")
    assert "Status:" not in out and "Total: 0 of 8 tests failed in 2 files (0 skipped, 4 ill-defined, 0 file errors)" in out


# -- output modes ---------------------------------------------------------------------------------
def test_default_output_is_one_line_per_file(tmp_path, capsys, fake_ops):
    d = _two_files(tmp_path, fake_ops)
    a, b = os.path.join(str(d), "a.gguf"), os.path.join(str(d), "b.gguf")
    code, out, err = run(capsys, d)
    assert code == 1 and err == ""
    assert out.startswith(f"{a}\nfirst file\nFound 2 tests\n{SEP}\nStatus: WRONG ANSWER\n")
    assert out.endswith(
        f"\n{SEP}\n{a}: 2 tests, 1 of 2 tests failed\n{b}: 3 tests, All tests passed\n"
        "Total: 1 of 5 tests failed in 2 files (0 skipped, 0 ill-defined, 0 file errors)\n"
    )
    assert out.count("Status:") == 1 and "second file" not in out  # passing tests and files stay short
    code, out, _ = run(capsys, d, "-k", "case 2")
    assert code == 0 and f"{a}: 0 of 2 tests selected, No tests selected\n{b}: 1 of 3 tests selected, All tests passed\n" in out
    code, out, _ = run(capsys, d, "--verbose")
    assert out.count("Status: PASS") == 4 and "second file\nFound 3 tests\n" in out and "All tests passed\nTotal" in out
    code, out, err = run(capsys, d, "--quiet", "--verbose")
    assert code == 2 and "--quiet and --verbose exclude each other" in err


def test_k_selecting_nothing(tmp_path, capsys, fake_ops):
    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))
    code, out, js = run_json(capsys, tmp_path, path, "-k", "no such thing")
    assert code == 1 and js["summary"]["exit_code"] == 1 and js["summary"]["selected"] == 0
    assert "All tests passed" not in out and "No tests selected" in out
    code, out, err = run(capsys, path, path, "-k", "no such thing", "--verbose")
    assert code == 1 and "All tests passed" not in out and "infiniop-test: no tests selected" in err


def test_json_path_checked_before_running(tmp_path, capsys, fake_ops, monkeypatch):
    from infiniop_py.gguf import runner

    monkeypatch.setattr(runner, "run_test", lambda *a: pytest.fail("a test ran"))
    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))
    target = tmp_path / "no" / "such" / "dir" / "r.json"
    code, out, err = run(capsys, path, "--json", target)
    assert code == 2 and out == "" and f"infiniop-test: cannot write --json file '{target}': No such file or directory" in err
    assert ".infiniop-test-" not in err
    code, out, err = run(capsys, path, "--json", tmp_path)
    assert code == 2 and out == "" and f"cannot write --json file '{tmp_path}': it is a directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.gguf"]  # the probe left nothing behind


def test_json_write_failure_names_the_path(tmp_path, capsys, fake_ops, monkeypatch):
    def full_disk(path, payload):
        raise OSError(28, "No space left on device", str(tmp_path / ".infiniop-test-x1y2.json"))

    monkeypatch.setattr(cli, "write_json", full_disk)
    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))
    code, out, err = run(capsys, path, "--json", tmp_path / "r.json")
    assert code == 2 and f"cannot write --json file '{tmp_path / 'r.json'}': No space left on device" in err
    assert ".infiniop-test-" not in err


# -- robustness -----------------------------------------------------------------------------------
def test_traceback_only_on_request(tmp_path, capsys, fake_ops, monkeypatch):
    path = write_one(tmp_path / "r.gguf", _simple("fake_raise"))
    code, out, err = run(capsys, path)
    assert code == 1 and "Traceback" not in out + err
    monkeypatch.setenv("INFINIOP_TEST_TRACEBACK", "1")
    code, out, err = run(capsys, path)
    assert code == 1 and "Traceback" in err and "Traceback" not in out


def test_device_error_state(tmp_path, capsys, fake_ops, monkeypatch):
    def broken(self):
        self.broken = "CUDARuntimeError: cudaErrorIllegalAddress"

    monkeypatch.setattr(Device, "check_health", broken)
    recs = [_simple("fake_raise"), scale_record(X, X.astype(np.float64))]
    code, out, data = run_json(capsys, tmp_path, write_one(tmp_path / "e.gguf", *recs))
    t = data["files"][0]["tests"]
    assert [x["status"] for x in t] == ["EXECUTION FAILED", "EXECUTION FAILED"]
    assert t[1]["error"].startswith("device in error state")


def test_colour(tmp_path, fake_ops, monkeypatch):
    path = write_one(tmp_path / "s.gguf", scale_record(X, X.astype(np.float64)))

    class TTY(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    for env, coloured in ((None, True), ("1", False)):
        if env is not None:
            monkeypatch.setenv("NO_COLOR", env)
        out = TTY()
        cli.Session(cli.parse_args([path, "--verbose"]), out=out, err=io.StringIO()).run()
        assert ("\033[32mPASS\033[0m" in out.getvalue()) == coloured
        assert ("\033[" in out.getvalue()) == coloured


def test_progress_bar_only_on_tty(tmp_path, fake_ops):
    path = write_one(tmp_path / "many.gguf", *[scale_record(X, X.astype(np.float64))] * 21)

    class TTY(io.StringIO):
        def isatty(self):
            return True

    err, out = TTY(), io.StringIO()
    assert cli.Session(cli.parse_args([path, "--verbose"]), out=out, err=err).run() == 0
    assert "21/21" in err.getvalue() or "many.gguf" in err.getvalue()
    assert out.getvalue().count("Status: PASS") == 21
    err = TTY()
    cli.Session(cli.parse_args([path, "--quiet"]), out=io.StringIO(), err=err).run()
    assert err.getvalue() == ""


def test_upstream_layout_fixtures_pass(tmp_path, capsys):
    """Files laid out as upstream's own generators write them (test/upstream_fixtures.py): every
    case passes but the known ill-defined ones (one per dtype in linear, linear_backward and
    batch_norm_backward), which are reported as such and fail only under --strict."""
    import upstream_fixtures

    paths = upstream_fixtures.write_all(str(tmp_path / "up"))
    code, out, data = run_json(capsys, tmp_path, "--cpu", tmp_path / "up")
    assert code == 0 and len(data["files"]) == len(paths) == len(upstream_fixtures.FIXTURES) >= 14, out
    for f in data["files"]:
        op = os.path.basename(f["path"])[: -len(".gguf")]
        block = f["test_count"] // 2  # these files hold an F32 and an F16 copy of the cases
        ill = {k * block + i for k in (0, 1) for i in upstream_fixtures.ILL_DEFINED.get(op, ())}
        got = {t["index"]: t["status"] for t in f["tests"]}
        assert got == {i: "ILL-DEFINED" if i in ill else "PASS" for i in range(f["test_count"])}, (op, out)
    assert data["summary"]["ill_defined"] == 6 and data["summary"]["failed"] == 0
    assert "linear.gguf: 24 tests, 22 passed, 0 failed, 2 ill-defined\n" in out
    assert "input 'w' (shape [3, 4], strides [3, 6]) overlaps itself and its stored values differ" in out
    code, out, _ = run(capsys, "--cpu", tmp_path / "up", "--strict", "--quiet")
    assert code == 1 and "linear.gguf: 24 tests, 2 of 24 tests failed (2 ill-defined)\n" in out


def test_console_entry_point(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run(
        [sys.executable, "-m", "infiniop_py.cli", str(tmp_path / "none.gguf")], capture_output=True, text=True, env=env
    )
    assert r.returncode == 2 and "no such file or directory" in r.stderr and "Traceback" not in r.stderr
