"""Generate docs/ops.md (the operator reference table) from the registry: ``python tools/gen_docs.py``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ORDER = ["F16", "BF16", "F32", "F64", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "BOOL"]


def _dtypes(names) -> str:
    names = sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else 99)
    return ", ".join(n.lower() for n in names)


def render() -> str:
    import infiniop_py as iop

    lines = [
        "# Operator reference",
        "",
        "Generated from the registry by `python tools/gen_docs.py` (a test fails when it is stale).",
        "The `torch` column is each operator's PyTorch equivalent (the tests compare against a float64",
        "PyTorch reference); GGUF files: docs/gguf.md. Tensors are listed outputs first, then inputs.",
        "",
        "| op | C-style stem | tensors (out \\| in) | attributes | runtime scalars | dtypes | torch | summary |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in iop.list_ops():
        info = iop.op_info(name)
        outs = ", ".join(t["name"] + ("?" if t["optional"] else "") for t in info["tensors"] if t["role"] != "in")
        ins = ", ".join(t["name"] + ("?" if t["optional"] else "") for t in info["tensors"] if t["role"] == "in")
        attrs = (
            ", ".join(f"{a['name']}: {a['kind']}" + ("" if a["required"] else f" = {a['default']!r}") for a in info["attrs"])
            or "—"
        )
        rt = ", ".join(f"{a['name']}: {a['kind']}" for a in info["runtime"]) or "—"
        dts = _dtypes(info["dtypes"]["cpu"])
        if info["dtypes"]["nvidia"] != info["dtypes"]["cpu"]:
            dts += f" (NVIDIA: {_dtypes(info['dtypes']['nvidia'])})"
        aliases = [g for g in info["gguf_names"] if g != name]
        label = f"`{name}`" + (f" (GGUF also {', '.join(aliases)})" if aliases else "")
        lines.append(
            f"| {label} | {info['stem']} | {outs} \\| {ins} | {attrs} | {rt} | {dts} | `{info['torch']}` | {info['summary']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    (ROOT / "docs" / "ops.md").write_text(render())
    print("wrote docs/ops.md")


if __name__ == "__main__":
    main()
