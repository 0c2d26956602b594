"""Benchmark harness: ``python -m infiniop_py.bench --help``; the method is in docs/perf/method.md.

core.py (timing, checking, byte counting), env.py (GPU and CPU environments), report.py
(metadata, tables, JSON/CSV) and suites/ (one module per operator family).
"""
