"""``infiniop-bench`` on the CPU: run (float64 check before timing, peers, only the columns that
apply, a timestamped JSON with Markdown and PNG files), report, compare (a planted 20% slow-down
is flagged and exits 1; the same numbers again are not), the conv grid suite, and a broken suite
file that costs one error row instead of the run."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


def bench_cmd() -> list[str]:
    """The installed console script where there is one (as a user runs it), else the module."""
    script = Path(sys.executable).parent / "infiniop-bench"
    if script.exists():
        return [str(script)]
    found = shutil.which("infiniop-bench")
    return [found] if found else [sys.executable, "-m", "infiniop_py.bench"]


def bench(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([*bench_cmd(), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One ``run --quick --cpu`` restricted to two families, f32: (process, out dir, JSON path)."""
    out = tmp_path_factory.mktemp("run")
    r = bench(
        "run", "--quick", "--cpu", "--family", "elementwise,rearrange", "--op", "add,rearrange",
        "--dtype", "f32", "--reps", "60", "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (path,) = out.glob("bench-cpu-*.json")
    return r, out, path


def test_run_writes_a_timestamped_json_markdown_and_plots(quick_run):
    r, out, path = quick_run
    stem = path.stem
    assert stem.startswith("bench-cpu-2") and len(stem) == len("bench-cpu-YYYYmmdd-HHMMSS")
    for ext in ("md", "txt", "csv", "log"):
        assert (out / f"{stem}.{ext}").stat().st_size > 0, ext
    pngs = sorted(out.glob(f"{stem}-*.png"))
    assert [p.name for p in pngs] == [f"{stem}-elementwise-add.png", f"{stem}-rearrange-rearrange.png"]
    assert all(p.read_bytes()[:8] == PNG for p in pngs)
    data = json.loads(path.read_text())
    meta = data["meta"]
    assert meta["timestamp"] and meta["git"].get("commit") is not None
    assert meta["versions"]["torch"] == torch.__version__ and meta["versions"]["numpy"]
    assert meta["settings"]["quick"] is True and meta["settings"]["reps"] == 60 and meta["settings"]["float64_check"]
    assert meta["copy_bandwidth"]["GBps"] > 0 and meta["matrix_rate"]["f32"] > 0
    rows = data["results"]
    assert {(x["op"], x["dtype"]) for x in rows} == {("add", "f32"), ("rearrange", "f32")}
    for row in rows:
        assert row["check_ref"]["ok"] and row["check_ref"]["detail"].startswith("float64 reference"), row
        assert row["check"]["ok"], row
        for impl in ("ours", "torch"):
            st = row["times_us"][impl]
            assert st["p10"] <= st["median"] <= st["p90"] and st["n"] == 60
        assert row["x_torch"] > 0 and row["x"]["torch"] == row["x_torch"]
    # the table has only the columns that apply on the CPU: no device or kernel-only times
    table = (out / f"{stem}.txt").read_text()
    header = next(line for line in table.splitlines() if line.startswith("op "))
    assert "ours us" in header and "torch us" in header and "x torch" in header and "%lim" in header
    assert "dev us" not in header and "kern us" not in header and "comp us" not in header
    assert "Host wall per call" in table and "ours cupy" not in table
    assert "wrote " in r.stdout and str(path) in r.stdout


def test_report_renders_markdown_and_png(quick_run, tmp_path):
    _, _, path = quick_run
    r = bench("report", str(path), "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    md = (tmp_path / f"{path.stem}.md").read_text()
    assert md.startswith(f"# Benchmark run {path.stem}")
    assert "## Results" in md and "## Per operator" in md and "Copy bandwidth measured in this run" in md
    assert "Matrix rate measured in this run: f32" in md
    assert f"![elementwise add]({path.stem}-elementwise-add.png)" in md
    assert (tmp_path / f"{path.stem}-elementwise-add.png").read_bytes()[:8] == PNG
    assert "Speed-up of ours" in md
    r = bench("report", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr


def test_report_pages_update_the_generated_block_only(quick_run, tmp_path):
    """``report --pages``: a CPU run updates one ``cpu.md`` between the markers, keeps the
    hand-written rest, links its plots; a second report replaces the block, never stacks it."""
    from infiniop_py.bench import pages
    from infiniop_py.bench.suites import discover

    _, _, path = quick_run
    page = tmp_path / "cpu.md"
    page.write_text("# CPU backend performance\n\nHand-written rules.\n")
    for _ in range(2):
        r = bench("report", str(path), "--pages", str(tmp_path))
        assert r.returncode == 0, r.stderr
    text = page.read_text()
    assert text.count(pages.BEGIN) == 1 and text.count(pages.END) == 1
    assert text.startswith("# CPU backend performance\n\n" + pages.BEGIN) and text.rstrip().endswith("Hand-written rules.")
    rows = json.loads(path.read_text())["results"]
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0] == "| op | case | dtype | ours | torch | × | % of limit | card | date |"
    date = json.loads(path.read_text())["meta"]["timestamp"][:10]
    for row in rows:
        line = next(line for line in lines if line.startswith(f"| {row['op']} | {row['case']} | f32 |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[5] == f"{row['x']['torch']:.2f}" and cells[7:] == ["CPU", date]
    for link in ("img/cpu-elementwise-add.png", "img/cpu-rearrange-rearrange.png"):
        assert f"]({link})" in text and (tmp_path / link).read_bytes()[:8] == PNG
    assert pages.splice("", "B", "t") == "# t\n\nB\n"
    gpu = {"machine": {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"}}
    suites = discover()
    assert pages.card(gpu) == "H100" and pages.page_name(gpu, "rearrange", suites) == "rearrange"
    assert pages.page_name(gpu, "norms", suites) == "norms" and pages.page_name(gpu, "conv_grid", suites) == "conv"


def _slowed(data: dict, factor: float) -> dict:
    slow = copy.deepcopy(data)
    for row in slow["results"]:
        st = row["times_us"]["ours"]
        for key in ("median", "p10", "p90", "min"):
            st[key] *= factor
    return slow


def test_compare_flags_a_planted_slow_down_and_not_the_same_numbers(quick_run, tmp_path):
    _, _, path = quick_run
    data = json.loads(path.read_text())
    same = tmp_path / "same.json"
    same.write_text(json.dumps(data))
    r = bench("compare", str(path), str(same))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 regression(s) in 5 case(s) compared" in r.stdout and "REGRESSION" not in r.stdout
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(_slowed(data, 1.2)))
    r = bench("compare", str(path), str(slow))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REGRESSION" in r.stdout and "+20.0%" in r.stdout
    # faster is reported, not flagged
    r = bench("compare", str(slow), str(path))
    assert r.returncode == 0 and "faster" in r.stdout


def test_compare_rule_uses_both_runs_noise():
    from infiniop_py.bench import compare

    def row(med, spread, n=50, ok=True, **more):
        st = {"median": med, "p10": med - spread / 2, "p90": med + spread / 2, "n": n}
        return {
            "suite": "s",
            "op": "add",
            "case": "c",
            "dtype": "f32",
            "check": {"ok": ok, "detail": ""},
            "times_us": {"ours": st},
        } | more

    def verdict(old, new, **kw):
        (c,) = compare.compare_rows([old], [new], **kw)[0]
        return c.verdict

    assert verdict(row(100, 4), row(104, 4)) == "same"  # below the 10% floor
    assert verdict(row(100, 4), row(120, 4)) == "regression"  # 20%, tight spread
    assert verdict(row(100, 300), row(120, 300)) == "same"  # 20% inside very wide spreads (n = 50)
    assert verdict(row(100, 300, n=5000), row(120, 300, n=5000)) == "regression"  # many calls: the median is known
    assert verdict(row(100, 4), row(80, 4)) == "faster"
    assert verdict(row(100, 4), row(104, 4), min_change=0.02) == "regression"
    broken = row(100, 4, ok=False)
    broken["check"]["detail"] = "3 of 9 outside tolerance"
    assert verdict(row(100, 4), broken) == "broken"
    changes, only_old, only_new = compare.compare_rows([row(1, 0)], [row(1, 0) | {"case": "d"}])
    assert changes == [] and only_old and only_new


def test_bad_input_is_a_usage_error(tmp_path):
    from infiniop_py.bench import cli

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["compare", str(bad), str(bad)]) == 2
    (tmp_path / "x.json").write_text("[1, 2]")
    assert cli.main(["report", str(tmp_path / "x.json")]) == 2
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--cpu", "--reps", "0"])
    assert exc.value.code == 2
    assert cli.main(["run", "--cpu", "--family", "nope"]) == 2


# -- in process: a broken suite, the conv grid, peers, the float64 check --------------------------
@pytest.fixture
def fast_limits(monkeypatch):
    from infiniop_py.bench import env as bench_env

    monkeypatch.setattr(bench_env.CpuEnv, "copy_bandwidth", lambda self: {"GBps": 10.0, "how": "test"})
    monkeypatch.setattr(bench_env.CpuEnv, "matrix_rate", lambda self: {"f32": 0.1, "how": "test"})


def _rows(path: Path) -> list:
    return json.loads(path.read_text())["results"]


def test_a_broken_suite_file_is_one_error_row(fast_limits, monkeypatch, tmp_path, capsys):
    from infiniop_py.bench import cli, suites

    extra = tmp_path / "suites"
    extra.mkdir()
    (extra / "zz_import_error.py").write_text("import not_a_module_anywhere\n")
    (extra / "zz_cases_error.py").write_text(
        "NAME = 'zz_cases'\n\ndef cases(env, quick=False):\n    raise RuntimeError('boom')\n"
    )
    monkeypatch.setattr(suites, "__path__", [*suites.__path__, str(extra)])
    out = tmp_path / "r.json"
    argv = ["--cpu", "--family", "elementwise,zz_import_error,zz_cases", "--op", "add", "--dtype", "f32"]
    code = cli.main([*argv, "--match", "1024 ", "--reps", "5", "--host-calls", "10", "--json", str(out)])
    assert code == 1
    rows = _rows(out)
    errors = {r["suite"]: r["error"] for r in rows if r.get("error")}
    assert "ModuleNotFoundError" in errors["zz_import_error"] and "boom" in errors["zz_cases"]
    (add,) = [r for r in rows if r["op"] == "add"]
    assert add["check"]["ok"] and add["times_us"]["ours"]["n"] == 5
    assert "2 case(s) raised" in capsys.readouterr().out


def _grid(tmp_path, *more) -> tuple[int, list]:
    from infiniop_py.bench import cli

    out = tmp_path / "grid.json"
    code = cli.main(
        [
            "run",
            "--cpu",
            "--family",
            "conv_grid",
            "--match",
            "32x32 k3",
            "--reps",
            "5",
            "--host-calls",
            "5",
            "--json",
            str(out),
            *more,
        ]
    )
    return code, _rows(out)


def test_conv_grid_runs_or_skips_with_a_note(fast_limits, monkeypatch, tmp_path):
    from infiniop_py.bench.suites import conv_grid
    from infiniop_py.registry import resolve

    assert len(conv_grid.cases(None)) == 9 and sum(c.quick for c in conv_grid.cases(None)) == 3
    if resolve("conv") is not None:
        code, (row,) = _grid(tmp_path)
        assert code == 0, row
        assert row["check_ref"]["ok"] and row["check"]["ok"], row
        assert set(row["times_us"]) == {"ours", "torch", "im2col"} and row["check_peers"]["im2col"]["ok"]
        assert row["flops"] == 2 * 2 * 8 * 4 * 9 * 32 * 32 and row["TFLOPs"]["ours"] > 0 and "pct_matrix" in row
    import infiniop_py.registry as registry

    monkeypatch.setattr(registry, "resolve", lambda op: None if op == "conv" else resolve(op))
    code, (row,) = _grid(tmp_path)
    assert code == 0 and row["skipped"] == "operator 'conv' is not registered"


def test_missing_peer_is_skipped_with_a_note(fast_limits, monkeypatch, tmp_path):
    from infiniop_py.bench import peers
    from infiniop_py.registry import resolve

    if resolve("conv") is None:
        pytest.skip("conv is not registered")
    real = peers.optional
    monkeypatch.setattr(peers, "optional", lambda m: (None, "not installed (pip install jax)") if m == "jax" else real(m))
    code, (row,) = _grid(tmp_path, "--peers", "torch,jax")
    assert code == 0
    assert "jax" not in row["times_us"] and "im2col" not in row["times_us"]  # not asked for
    assert row["peer_notes"]["jax"].startswith("not installed")
    meta = json.loads((tmp_path / "grid.json").read_text())["meta"]
    assert meta["peer_notes"]["jax"].startswith("not installed")


def test_jax_peer_on_the_cpu(fast_limits, tmp_path):
    pytest.importorskip("jax")
    from infiniop_py.registry import resolve

    if resolve("conv") is None:
        pytest.skip("conv is not registered")
    code, (row,) = _grid(tmp_path, "--peers", "jax")
    assert code == 0, row
    assert row["check_peers"]["jax"]["ok"] and row["x"]["jax"] > 0 and row["compile_s"]["jax"] > 0


def test_a_wrong_result_fails_before_it_is_timed(fast_limits):
    """An output off by 1e-3 in f32 fails the float64 check: FAIL, no times, no speed-up."""
    from infiniop_py.bench import core, report
    from infiniop_py.bench.env import CpuEnv
    from infiniop_py.bench.suites.elementwise import CONTIGUOUS, binary_case

    good = binary_case("add", "f32", (1024,), CONTIGUOUS)

    def build(env):
        work = good.build(env)
        real = work.descriptor

        class Off:
            workspace_size = 0
            spec, info = real.spec, real.info

            def calculate(self, ws, c, a, b, **kw):
                real.calculate(ws, c, a, b, **kw)
                c += 1e-3

            def destroy(self):
                real.destroy()

        work.descriptor = Off()
        return work

    case = core.BenchCase("elementwise", "add", "1024 off by 1e-3", "f32", (1024,), build)
    row = core.run_case(CpuEnv(), case, core.Options(reps=5, warmup=1), 10.0)
    assert row["check"]["ok"] is False and "float64 reference: 1024 of 1024 outside" in row["check"]["detail"]
    assert "times_us" not in row and "x_torch" not in row
    line = report.progress_line(row)
    assert "FAIL: float64 reference" in line and "xtorch" not in line
    assert "1 case(s) FAILED the check" in report.table([row], {"GBps": 10.0}, "test")


def test_torch_off_the_exact_result_does_not_fail_a_correct_row(fast_limits):
    """Timed results are checked against torch eager; where torch is the one off (here by 1e-3)
    and ours matches the float64 reference, the reference decides: the row passes and says so."""
    from infiniop_py.bench import core
    from infiniop_py.bench.env import CpuEnv
    from infiniop_py.bench.suites.elementwise import CONTIGUOUS, binary_case

    good = binary_case("add", "f32", (1024,), CONTIGUOUS)

    def build(env):
        work = good.build(env)
        eager = work.torch_eager

        def off(s):
            out = eager(s)
            work.out_torch[s] += 1e-3
            return out

        work.torch_eager = off
        return work

    case = core.BenchCase("elementwise", "add", "1024, torch off by 1e-3", "f32", (1024,), build)
    row = core.run_case(CpuEnv(), case, core.Options(reps=5, warmup=1), 10.0)
    assert row["check_ref"]["ok"] is True
    assert row["check"]["ok"] is True and "against torch: 1024 of 1024" in row["check"]["detail"], row["check"]
    assert "times_us" in row and "unchecked" not in row["times_us"]["ours"]


def test_check64_accepts_what_torch_itself_misses_by_half():
    """Past the dtype tolerance, ours passes when no further from float64 than 2 x torch eager."""
    from infiniop_py.bench import core
    from infiniop_py.bench.env import CpuEnv

    work = core.Workload(descriptor=None, buffers=[], torch_eager=None, out_torch=[], inputs=[], atol=1e-5, rtol=1e-5)
    ref = torch.zeros(8, dtype=torch.float64)
    ok, detail = core.check64(CpuEnv(), work, torch.full((8,), 3e-4), ref, torch.full((8,), 2e-4))
    assert ok and "<= 2 x torch's" in detail
    ok, detail = core.check64(CpuEnv(), work, torch.full((8,), 5e-4), ref, torch.full((8,), 2e-4))
    assert not ok and "torch's 0.0002" in detail
    nan = torch.full((8,), 3e-4)
    nan[0] = float("nan")
    assert not core.check64(CpuEnv(), work, nan, ref, torch.full((8,), 2e-4))[0]
    # a reference of another shape but the same elements is compared; one that does not fit is no verdict
    assert core.check64(CpuEnv(), work, torch.zeros(2, 4), ref)[0] is True
    ok, detail = core.check64(CpuEnv(), work, torch.zeros(4), ref)
    assert ok is None and "not checked against float64" in detail


def test_quick_keeps_one_dtype_per_operator():
    from infiniop_py.bench import cli
    from infiniop_py.bench.core import BenchCase

    def case(op, dt, quick=True):
        return BenchCase("s", op, "c", dt, (1,), None, quick=quick)

    cases = [case("add", "f16"), case("add", "f32"), case("add", "bf16"), case("rope", "f16"), case("rope", "bf16")]
    cases.append(case("add", "f32", quick=False))
    got = cli.select(cases, cli.parse(["run", "--quick"]))
    assert [(c.op, c.dtype) for c in got] == [("add", "f32"), ("rope", "f16")]
    got = cli.select(cases, cli.parse(["run", "--quick", "--dtype", "bf16"]))
    assert [(c.op, c.dtype) for c in got] == [("add", "bf16"), ("rope", "bf16")]


def test_without_torch_run_is_one_line_and_compare_works(quick_run):
    """The tool imports torch only to measure: without it ``run`` says so in one line, and
    ``compare`` of existing files works."""
    _, _, path = quick_run
    block = "import sys; sys.modules['torch'] = None\nfrom infiniop_py.bench.cli import main\n"
    r = subprocess.run(
        [sys.executable, "-c", block + "sys.exit(main(['run', '--cpu']))"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "needs torch" in r.stderr
    r = subprocess.run(
        [sys.executable, "-c", block + f"sys.exit(main(['compare', {str(path)!r}, {str(path)!r}]))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "0 regression(s)" in r.stdout, r.stderr


def test_pointwise_suites_take_their_operators_from_the_registry(fast_limits, monkeypatch):
    """The elementwise and pointwise suites list the registry's operators (no list to keep); an
    operator without a one-kernel torch form is timed against its own reference function."""
    from infiniop_py.bench import core
    from infiniop_py.bench.env import CpuEnv
    from infiniop_py.bench.suites import elementwise, pointwise
    from infiniop_py.registry import get_spec

    assert set(elementwise.binary_ops()) == {"add", "sub", "mul", "div"}
    unary = set(pointwise.unary_ops())
    assert {"exp", "sin", "cos", "tanh", "sigmoid", "silu", "relu", "gelu", "gelutanh", "gelu(tanh)"} <= unary
    assert "cast" not in unary and all(get_spec(op.split("(")[0]) for op in unary)
    assert set(pointwise.binary_ops()) == {"sigmoid_backward", "relu_backward", "gelu_backward", "swiglu"}
    monkeypatch.setattr(pointwise, "_unary", lambda torch: {})  # no curated torch form: the reference
    monkeypatch.setattr(pointwise, "_binary", lambda torch: {})
    for case in (pointwise.unary_case("gelu(tanh)", "f32", (64, 64)), pointwise.binary_case("sigmoid_backward", "f32", (64, 64))):
        row = core.run_case(CpuEnv(), case, core.Options(reps=3, warmup=1), 10.0)
        assert row["check"]["ok"] and row["check_ref"]["ok"], row
