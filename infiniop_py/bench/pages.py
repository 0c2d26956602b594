"""The docs/perf pages from one run (``infiniop-bench report RUN.json --pages DIR``).

Each family (suite) of a GPU run updates ``DIR/<page>.md`` (the suite's ``PAGE``, default its
name); a CPU run updates one ``DIR/cpu.md``. On a page, the block between the two markers below
is replaced by the run's: a provenance line, the table every perf page opens with (op, case,
dtype, ours, the first peer, ×, % of limit, card, date), a table of the other peers and the
device-time ratio, the host-wall table, and the plots (``DIR/img``). The rest of a page (rules,
limits, what was tried) is written by hand and kept. A page without the markers gets the block
after its title; a family without a page gets a new one.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import plots
from .report import _f, _host_table, _us, limit_of, message, peer_names

BEGIN = "<!-- infiniop-bench:begin -->"
END = "<!-- infiniop-bench:end -->"


def card(meta: dict) -> str:
    """A short name of the machine: the GPU's model (``H100``), or ``CPU``."""
    m = meta.get("machine") or {}
    if m.get("kind") == "cpu":
        return "CPU"
    name = str(m.get("name", "?"))
    found = re.search(r"\b([A-Z]+\d{2,4}[A-Za-z]*)\b", name.replace("NVIDIA", ""))
    return found.group(1) if found else name


def _commit(meta: dict) -> str:
    git = meta.get("git") or {}
    c = git.get("commit")
    return "an unknown commit" if not c else f"commit {c[:7]}" + (" with local changes" if git.get("dirty") else "")


def _provenance(meta: dict, n: int) -> str:
    m, s = meta.get("machine") or {}, meta.get("settings") or {}
    bw = (meta.get("copy_bandwidth") or {}).get("GBps")
    rates = ", ".join(f"{k} {v:.1f}" for k, v in (meta.get("matrix_rate") or {}).items() if isinstance(v, (int, float)))
    quick = " --quick" if s.get("quick") else ""
    cpu = " --cpu" if m.get("kind") == "cpu" else ""
    parts = [
        f"`infiniop-bench run{cpu}{quick}` ({n} cases) on {m.get('name', '?')},",
        f"{str(meta.get('timestamp', '?'))[:10]}, {_commit(meta)}; median µs per call over {s.get('reps', '?')} interleaved calls",
        f"({s.get('timing', '')}); × = the peer's time / ours (above 1 we are faster); % of limit = minimal bytes over the copy",
        f"bandwidth measured in the same run ({bw:.0f} GB/s)" if bw else "bandwidth",
        f"or, for rows that count FLOPs, the matrix rate of the same run (TFLOP/s: {rates})." if rates else ".",
        "Every row passed its float64 check unless it says otherwise.",
    ]
    return " ".join(parts)


def _msg(r) -> str | None:
    msg = message(r)
    if msg is None and not (r.get("check") or {}).get("ok"):
        msg = "FAIL: " + (r.get("check") or {}).get("detail", "")
    return msg


def _md(head: list[str], body: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(str(v) for v in cells) + " |" for cells in body]


def table(meta: dict, rows: list) -> list[str]:
    """The family's table (Markdown lines): op, case, dtype, ours, the first peer (torch where it
    ran) and ours' speed-up against it, % of limit, card, date -- the columns every perf page
    opens with."""
    peers = peer_names(rows)
    peer = peers[0] if peers else "torch"
    c, date = card(meta), str(meta.get("timestamp", "?"))[:10]
    body = []
    for r in rows:
        msg = _msg(r)
        if msg is not None:
            body.append([r.get("op", "-"), r.get("case", "-"), r.get("dtype", "-"), msg, "", "", "", c, date])
            continue
        ok = (r.get("check_peers") or {}).get(peer, {}).get("ok", True)
        lim, kind = limit_of(r)
        body.append(
            [r["op"], r["case"], r["dtype"], _num(_us(r, "ours")), _num(_us(r, peer) if ok else None)]
            + [_f((r.get("x") or {}).get(peer), ".2f"), "-" if lim is None else f"{lim:.0f}% ({kind})", c, date]
        )
    return _md(["op", "case", "dtype", "ours", peer, "×", "% of limit", "card", "date"], body)


def more_table(rows: list) -> list[str]:
    """The other peers (µs and ×) and the device-time ratio against torch, where the run has
    them; no lines where it has neither."""
    peers = peer_names(rows)[1:]
    device = any(r.get("device_x_torch") is not None for r in rows)
    if not peers and not device:
        return []
    head = ["op", "case", "dtype"] + [h for p in peers for h in (p, f"× {p}")] + (["× torch, device"] if device else [])
    body = []
    for r in rows:
        if _msg(r) is not None:
            continue
        if not device and not any(_us(r, p) is not None for p in peers):
            continue  # a row none of the other peers ran
        cells = [r["op"], r["case"], r["dtype"]]
        for p in peers:
            ok = (r.get("check_peers") or {}).get(p, {}).get("ok", True)
            cells += [_num(_us(r, p) if ok else None), _f((r.get("x") or {}).get(p), ".2f")]
        if device:
            cells.append(_f(r.get("device_x_torch"), ".2f"))
        body.append(cells)
    note = "× torch, device: the ratio of device time alone (calls queued behind a blocking kernel, so the host's launch cost is outside the events)."
    return [note if device else "Other peers:", "", *_md(head, body), ""]


def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def block(meta: dict, suite: str, rows: list, img_links: list[tuple[str, str]]) -> str:
    lines = [BEGIN, _provenance(meta, len(rows)), "", *table(meta, rows), "", *more_table(rows)]
    host = [r for r in rows if r.get("host_wall_us")]
    if host:
        cols, cells = _host_table(host)
        lines += ["Host wall per call, µs (back-to-back calls, one synchronisation at the end):", ""]
        lines += [*_md([t for t, _ in cols], cells), ""]
    for op, link in img_links:
        lines.append(f"![{suite} {op}]({link})")
    if img_links:
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def splice(text: str, new_block: str, title: str) -> str:
    """``text`` with its generated block replaced by ``new_block`` (inserted after the title
    where it has none; a new page where ``text`` is empty)."""
    if not text.strip():
        return f"# {title}\n\n{new_block}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + new_block + rest.split(END, 1)[1]
    lines = text.splitlines(keepends=True)
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
    return "".join(lines[:at]) + "\n" + new_block + "\n" + "".join(lines[at:])


def page_name(meta: dict, suite: str, suites: dict) -> str:
    """The page a family's rows go to: the suite's ``PAGE`` (default its name; ``suites``: the
    discovered suite modules) on a GPU, one ``cpu`` page for a CPU run."""
    return "cpu" if card(meta) == "CPU" else getattr(suites.get(suite), "PAGE", suite)


def write(meta: dict, rows: list, out_dir: Path) -> list[Path]:
    """Update the pages of every family of the run under ``out_dir`` (plots under
    ``out_dir/img``); the paths written."""
    from .suites import discover

    suites = discover()
    by_page: dict = {}
    for r in rows:
        by_page.setdefault(page_name(meta, r.get("suite", "other"), suites), []).append(r)
    why = plots.available()
    written = []
    img = out_dir / "img"
    for page_stem, rs in by_page.items():
        links = []
        if why is None:
            img.mkdir(parents=True, exist_ok=True)
            for (suite, op), ors in plots.groups(rs).items():
                name = plots.file_name(page_stem, op) if page_stem == suite else plots.file_name(page_stem, suite, op)
                plots.plot_op(img / name, suite, op, ors, (meta.get("machine") or {}).get("name", "?"))
                written.append(img / name)
                links.append((op, f"img/{name}"))
        page = out_dir / f"{page_stem}.md"
        old = page.read_text() if page.exists() else ""
        page.write_text(splice(old, block(meta, page_stem, rs, links), f"{page_stem} performance"))
        written.append(page)
    return written
