"""Benchmark harness: ``infiniop-bench --help`` (or ``python -m infiniop_py.bench``); the method
is in docs/perf/method.md.

cli.py (run / report / compare), core.py (checking, timing, byte counting), peers.py (torch
eager, torch.compile, JAX and the suites' own peers), env.py (GPU and CPU environments, copy
bandwidth and matrix rate), report.py (metadata, tables, JSON/CSV, the Markdown report),
plots.py (PNG plots), compare.py (regressions between two runs) and suites/ (one module per
operator family). Importing this package imports neither torch nor CuPy.
"""
