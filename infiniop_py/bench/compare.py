"""``infiniop-bench compare OLD.json NEW.json``: our times of two runs, case by case.

A case is a regression when our median got slower by at least ``min_change`` (default 10%) *and*
by more than the two runs' own noise: ``z`` (default 3) standard errors of the difference of the
two medians, each median's standard error estimated from its run's p10-p90 spread and its
number of calls (spread / 2.563 is the standard deviation of a normal distribution with that
spread; the median's standard error is 1.2533 sigma / sqrt(n)). Per-call times are compared, and
device times where both runs have them (GPU). A case that passed its check in OLD and fails it,
raises or is INVALID in NEW is a regression too. Cases in only one of the runs are listed, not
flagged. Exit status 1 when anything is flagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

METRICS = (("per-call", "times_us"), ("device", "device_us"))
SIGMA_PER_SPREAD = 1 / 2.5631  # p90 - p10 of a normal distribution is 2.5631 sigma
MEDIAN_SE = 1.2533  # standard error of a median: 1.2533 sigma / sqrt(n)


@dataclass
class Change:
    key: tuple
    metric: str
    old: float | None
    new: float | None
    change: float | None  # new / old - 1
    noise: float | None  # z standard errors of the difference, relative to old
    verdict: str  # "regression", "faster", "same", "broken"
    detail: str = ""


def key(row) -> tuple:
    return (row.get("suite"), row.get("op"), row.get("case"), row.get("dtype"))


def _good(row) -> bool:
    return bool(row.get("check", {}).get("ok")) and not row.get("invalid") and not row.get("error") and bool(row.get("times_us"))


def _state(row) -> str:
    if row.get("error"):
        return "raised: " + row["error"].splitlines()[0][:100]
    if row.get("invalid"):
        return "INVALID: " + "; ".join(row["invalid"])[:100]
    if row.get("skipped"):
        return "skipped: " + row["skipped"]
    if row.get("check") and not row["check"]["ok"]:
        return "FAIL: " + row["check"]["detail"][:100]
    return "ok"


def median_se(st: dict) -> float:
    """Standard error of ``st``'s median from its p10-p90 spread and its number of calls."""
    spread = max(0.0, float(st.get("p90", st["median"])) - float(st.get("p10", st["median"])))
    n = max(1, int(st.get("n", 50)))
    return MEDIAN_SE * spread * SIGMA_PER_SPREAD / math.sqrt(n)


def compare_rows(old_rows: list, new_rows: list, min_change: float = 0.10, z: float = 3.0):
    """(changes, only_old, only_new): one Change per case and metric both runs measured."""
    old = {key(r): r for r in old_rows}
    new = {key(r): r for r in new_rows}
    changes = []
    for k, o in old.items():
        n = new.get(k)
        if n is None:
            continue
        if _good(o) and not _good(n) and not n.get("skipped"):
            changes.append(Change(k, "check", None, None, None, None, "broken", _state(n)))
            continue
        if not (_good(o) and _good(n)):
            continue
        for metric, field in METRICS:
            so, sn = (o.get(field) or {}).get("ours"), (n.get(field) or {}).get("ours")
            if not so or not sn or not so.get("median") or not sn.get("median"):
                continue
            mo, mn = float(so["median"]), float(sn["median"])
            change = mn / mo - 1
            noise = z * math.hypot(median_se(so), median_se(sn)) / mo
            if change >= min_change and change > noise:
                verdict = "regression"
            elif -change >= min_change and -change > noise:
                verdict = "faster"
            else:
                verdict = "same"
            changes.append(Change(k, metric, mo, mn, change, noise, verdict))
    only_old = [k for k in old if k not in new]
    only_new = [k for k in new if k not in old]
    return changes, only_old, only_new


def _name(k) -> str:
    suite, op, case, dtype = k
    return f"{suite}/{op} {case} {dtype}"


def format_report(changes, only_old, only_new, old_meta: dict, new_meta: dict, min_change: float, z: float) -> str:
    lines = []
    om, nm = (old_meta.get("machine") or {}).get("name"), (new_meta.get("machine") or {}).get("name")
    if om != nm:
        lines.append(f"note: the runs are from different machines ({om} / {nm}): times are not comparable")
    lines.append(
        f"Our median per case, OLD -> NEW; flagged when slower by >= {min_change:.0%} and by more than {z:g} "
        "standard errors of the difference (each from its run's p10-p90 spread and call count)"
    )
    width = max([len(_name(c.key)) for c in changes] + [20])
    lines.append(f"{'case':<{width}}  {'metric':<8}  {'old us':>10}  {'new us':>10}  {'change':>8}  {'noise':>7}  verdict")
    for c in changes:
        if c.verdict == "broken":
            lines.append(f"{_name(c.key):<{width}}  {c.metric:<8}  {'-':>10}  {'-':>10}  {'-':>8}  {'-':>7}  BROKEN ({c.detail})")
            continue
        mark = {"regression": "REGRESSION", "faster": "faster", "same": "same"}[c.verdict]
        lines.append(
            f"{_name(c.key):<{width}}  {c.metric:<8}  {c.old:>10.2f}  {c.new:>10.2f}  {c.change:>+8.1%}  {c.noise:>7.1%}  {mark}"
        )
    if only_old:
        lines.append(f"only in OLD ({len(only_old)}): " + ", ".join(_name(k) for k in only_old[:20]))
    if only_new:
        lines.append(f"only in NEW ({len(only_new)}): " + ", ".join(_name(k) for k in only_new[:20]))
    bad = [c for c in changes if c.verdict in ("regression", "broken")]
    compared = len({c.key for c in changes})
    lines.append(
        f"{len(bad)} regression(s) in {compared} case(s) compared"
        + (f"; {sum(c.verdict == 'faster' for c in changes)} faster" if any(c.verdict == "faster" for c in changes) else "")
    )
    return "\n".join(lines)
