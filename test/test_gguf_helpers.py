"""Helpers for the GGUF and runner tests (no tests here).

- :func:`raw_gguf` writes GGUF bytes by hand, so malformed files can be made precisely.
- :func:`fake_ops` registers deliberately simple (and deliberately broken) operators in the
  registry for the duration of one test only.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from infiniop_py import registry
from infiniop_py.dtypes import ALL, DType, F
from infiniop_py.gguf import GGUFDialect, TestRecord, write_file
from infiniop_py.spec import REQUIRED, Attr, Info, OpSpec, inout, inp, out
from infiniop_py.status import Status, error

# -- raw GGUF bytes ------------------------------------------------------------------------------
_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


def _str(s: str | bytes, e: str) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack(e + "Q", len(b)) + b


def _val(vtype: int, value, e: str) -> bytes:
    if vtype == STRING:
        return _str(value, e)
    if vtype == ARRAY:
        sub, items = value
        return struct.pack(e + "IQ", sub, len(items)) + b"".join(_val(sub, v, e) for v in items)
    return struct.pack(e + _FMT[vtype], value)


def raw_gguf(kvs=(), tensors=(), *, version=3, magic=b"GGUF", big_endian=False, alignment=32) -> bytes:
    """GGUF bytes. ``kvs``: (key, vtype, value), arrays as (key, 9, (subtype, items)).
    ``tensors``: (name, natural shape, ggml type, data bytes)."""
    e = ">" if big_endian else "<"
    out = bytearray(magic + struct.pack(e + "I", version) + struct.pack(e + "QQ", len(tensors), len(kvs)))
    for key, vtype, value in kvs:
        out += _str(key, e) + struct.pack(e + "I", vtype) + _val(vtype, value, e)
    offset, blobs = 0, []
    for name, shape, ggml, data in tensors:
        out += _str(name, e) + struct.pack(e + "I", len(shape))
        out += b"".join(struct.pack(e + "Q", d) for d in reversed(shape))
        out += struct.pack(e + "IQ", ggml, offset)
        blobs.append((offset, data))
        offset += -(-len(data) // alignment) * alignment
    out += b"\0" * (-len(out) % alignment)
    start = len(out)
    for off, data in blobs:
        out += b"\0" * (start + off - len(out)) + data
    out += b"\0" * (-len(out) % alignment)
    return bytes(out)


def add_kvs(i=0, shape=(2, 3), op="add"):
    """Keys of a minimal valid add test ``i``."""
    p = f"test.{i}."
    return [
        (p + "op_name", STRING, op),
        (p + "c.shape", ARRAY, (11, list(shape))),
        (p + "c.strides", ARRAY, (11, [1, shape[1]])),
    ]


def add_tensors(i=0, shape=(2, 3), a=None, b=None):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) if a is None else a
    b = np.ones(shape, np.float32) if b is None else b
    p = f"test.{i}."
    return [
        (p + "c", (0, 0), 0, b""),
        (p + "a", shape, 0, a.tobytes()),
        (p + "b", shape, 0, b.tobytes()),
        (p + "ans", shape, 28, (a.astype(np.float64) + b).tobytes()),
    ]


# -- fake operators ------------------------------------------------------------------------------
def _validate(check) -> Info:
    return Info(check.op, check.tensors, check.attrs)


def _cpu(fn, workspace: int = 0):
    def factory(info):
        def run(views, ws, rt):
            fn(info, views, ws, rt)

        run.workspace_size = workspace
        return run

    return factory


def _scale(info, v, ws, rt):
    y, x = v["y"], v["x"]
    if y.size:
        y[...] = (x.astype(np.float64) * info.attrs["scale"] + rt[0]).astype(y.dtype)


def _nowrite(info, v, ws, rt):
    pass


def _spill(info, v, ws, rt):
    """Copies correctly, then scribbles over the whole span of y (gaps included)."""
    y, x = v["y"], v["x"]
    y[...] = x
    d = info.tensors["y"]
    flat = np.lib.stride_tricks.as_strided(y, shape=(d.span,), strides=(y.itemsize,))
    flat[...] = flat[0]
    y[...] = x


def _ws(info, v, ws, rt):
    v["y"][...] = ws[: v["y"].size].view(np.int8).reshape(v["y"].shape)


def _raise(info, v, ws, rt):
    raise ZeroDivisionError("deliberate failure")


def _bad_validate(check):
    raise error(Status.BAD_PARAM, f"{check.op}: always rejected")


def _two(info, v, ws, rt):
    v["y"][...] = v["x"]
    v["idx"][...] = np.arange(v["idx"].size, dtype=np.int64).reshape(v["idx"].shape)
    if v.get("extra") is not None:
        v["extra"][...] = 0


def _acc(info, v, ws, rt):
    v["acc"][...] = v["acc"] + v["x"]


def _argmax(info, v, ws, rt):
    v["result"][...] = int(np.argmax(v["data"]))


class _RenameDialect(GGUFDialect):
    """Test dialect: files call the input 'source' and may carry 'zero_acc' asking for zeros."""

    attr_types = {"scale": "f64"}

    def prepare(self, raw):
        raw.rename("source", "x")
        raw.notes["zero"] = raw.value("zero_acc") is not None

    def adapt(self, test, raw):
        if raw.notes["zero"]:
            test.tensors["acc"].data = None
            test.tensors["acc"].fill = 0.0

    def write(self, record):
        record.rename("x", "source")


SCALE_ATTRS = (
    Attr("scale", "float", REQUIRED, aliases=("alpha",)),
    Attr("count", "int", 1),
    Attr("flag", "bool", False),
    Attr("dims", "ints", ()),
    Attr("mode", "str", "none"),
)


def fake_specs() -> list[OpSpec]:
    def spec(name, fn, tensors=None, workspace=0, **kw):
        kw.setdefault("validate", _validate)
        kw.setdefault("dtypes", ALL)
        return OpSpec(
            name=name,
            stem=name.title().replace("_", ""),
            tensors=tensors or (out("y"), inp("x")),
            cpu=None if fn is None else _cpu(fn, workspace),
            **kw,
        )

    return [
        spec(
            "fake_scale",
            _scale,
            attrs=SCALE_ATTRS,
            runtime=(Attr("shift", "float", 0.0),),
            gguf_names=("fake_alias",),
            inplace=(("y", "x"),),
            reference=lambda x, scale, shift, **_: x * scale + shift,
        ),
        spec("fake_nowrite", _nowrite),
        spec("fake_spill", _spill),
        spec("fake_ws", _ws, workspace=64),
        spec("fake_raise", _raise),
        spec("fake_bad", _scale, validate=_bad_validate),
        spec("fake_nocpu", None),
        spec(
            "fake_two",
            _two,
            tensors=(out("y"), out("idx"), out("extra", optional=True), inp("x")),
        ),
        spec("fake_acc", _acc, tensors=(inout("acc", init=2.0), inp("x")), dtypes=F, gguf=_RenameDialect()),
        spec("fake_index", _argmax, tensors=(out("result", compare="index"), inp("data"))),
    ]


@pytest.fixture
def fake_ops(monkeypatch):
    """Register the fake operators (and their aliases) for one test."""
    specs = registry._discover()
    for s in fake_specs():
        monkeypatch.setitem(specs, s.name, s)
        for alias in s.gguf_names:
            monkeypatch.setitem(registry._ALIASES, alias, s.name)
    return specs


def scale_record(x, ans, *, scale=1.0, strides=None, out_strides=None, op="fake_scale", dtype=DType.F32, **keys):
    """A fake_scale test: y = x * scale; ``keys`` become extra (key, value, vtype) settings."""
    rec = TestRecord(op)
    x = np.asarray(x)
    rec.set("scale", scale, "f32")
    for k, (v, t) in keys.items():
        rec.set(k, v, t)
    rec.add_output("y", x.shape, out_strides, dtype)
    rec.add_input("x", x, dtype, strides)
    rec.add_expected("ans", ans)
    return rec


def write_one(path, *records, description=""):
    write_file(path, list(records), description)
    return str(path)
