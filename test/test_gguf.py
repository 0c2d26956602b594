"""GGUF container, canonical layout, per-test binding and the generators (gguf.md §1-§3, §5)."""

from __future__ import annotations

import struct

import gguf
import ml_dtypes
import numpy as np
import pytest
import test_gguf_helpers
from gguf import GGUFValueType as V
from test_gguf_helpers import ARRAY, STRING, add_kvs, add_tensors, raw_gguf, scale_record, write_one

from infiniop_py.dtypes import DType
from infiniop_py.gguf import FileError, GGUFFile, TestError, TestRecord, WriteError, load_test, storable, write_file
from infiniop_py.gguf.container import Value
from infiniop_py.gguf.values import as_bool, as_float, as_int, as_ints, as_str, format_value

fake_ops = test_gguf_helpers.fake_ops  # the fixture, registered for this module


def _file(tmp_path, data: bytes, name="t.gguf") -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def _valid(**kw) -> bytes:
    return raw_gguf([("general.architecture", STRING, "infiniop-test"), ("test_count", 10, 1), *add_kvs()], add_tensors(), **kw)


# -- writer -> reader round trip ---------------------------------------------------------------------
def test_round_trip_layout(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((13, 4)).astype(np.float16)
    row = rng.standard_normal(4).astype(ml_dtypes.bfloat16)
    rec = TestRecord("add")
    rec.set("description", "padded + broadcast", "str")
    rec.set("seed", 2**64 - 1, "u64")
    rec.add_output("c", (13, 4), (10, 1), DType.F16)
    rec.add_input("a", a, DType.F16, (10, 1))
    rec.add_input("b", np.broadcast_to(row.astype(np.float16), (13, 4)), DType.F16, (0, 1))
    rec.add_expected("ans", a.astype(np.float64) + row.astype(np.float64))
    rec0 = TestRecord("zeros")  # 0-d output and bool via Q8_K
    rec0.add_output("y", (), (), DType.BOOL)
    rec0.add_input("x", np.array(True), DType.BOOL)
    rec0.add_expected("ans", np.array(False))
    path = write_one(tmp_path / "rt.gguf", rec, rec0, description="round trip")

    with GGUFFile(path) as f:
        keys = list(f.fields)
        assert keys[:3] == ["general.architecture", "general.description", "test_count"]
        assert keys[3] == "test.0.op_name" and "general.alignment" not in keys
        assert f.fields["test_count"].vtype == V.UINT64 and f.test_count == 2
        assert f.fields["test.0.c.shape"] == Value(V.ARRAY, [13, 4], V.INT64)
        assert f.fields["test.0.c.strides"] == Value(V.ARRAY, [1, 10], V.INT64)  # reversed
        assert f.fields["test.0.b.shape"].value == [13, 4]
        assert f.tensors["test.0.c"].shape == (0, 0)  # empty placeholder
        assert f.tensors["test.0.b"].shape == (1, 4)  # reduced zero-stride input
        assert f.tensors["test.1.y"].shape == () and f.fields["test.1.y.shape"].value == []
        assert f.tensors["test.1.x"].ggml_type == 15 and f.tensors["test.1.x"].shape == ()
        assert f.tensors["test.0.ans"].ggml_type == 28
        assert all((t.offset - f.data_offset) % 32 == 0 for t in f.tensors.values())
        assert f.data_offset % 32 == 0 and f.fields["test.0.seed"].value == 2**64 - 1

        t = load_test(f, 0)
        assert t.description == "padded + broadcast" and t.seed == 2**64 - 1
        c, ta, tb = t.tensors["c"], t.tensors["a"], t.tensors["b"]
        assert (c.shape, c.strides, c.dtype, c.data) == ((13, 4), (10, 1), DType.F16, None)
        assert ta.strides == (10, 1) and np.array_equal(ta.data, a)
        assert tb.strides == (0, 1) and np.array_equal(tb.data[5], row.astype(np.float16))
        assert t.expected["c"].dtype == np.float64
        t1 = load_test(f, 1)
        assert t1.tensors["y"].shape == () and t1.tensors["y"].dtype == DType.BOOL
        assert t1.tensors["x"].data.dtype == np.bool_ and t1.expected["y"].shape == ()


def test_writer_padding_is_zero_and_deterministic(tmp_path):
    rec = scale_record(np.arange(3, dtype=np.float32), np.arange(3.0))
    p1 = write_one(tmp_path / "1.gguf", rec)
    p2 = write_one(tmp_path / "2.gguf", rec)
    data = open(p1, "rb").read()
    assert data == open(p2, "rb").read()
    with GGUFFile(p1) as f:
        x = f.tensors["test.0.x"]
        end = x.offset + 12
        assert data[end : end + 20] == b"\0" * 20  # pad to 32


@pytest.mark.parametrize("dtype", [DType.U8, DType.U16, DType.U32, DType.U64, DType.F8, DType.C64, DType.C128])
def test_writer_refuses_unstorable(dtype):
    assert not storable(dtype)
    rec = TestRecord("add")
    with pytest.raises(WriteError, match="cannot be stored"):
        rec.add_output("c", (2,), None, dtype)


def test_writer_refuses_unsigned_arrays():
    with pytest.raises(WriteError):
        TestRecord("add").add_input("a", np.zeros(3, np.uint32), DType.U32)


# -- Q8_K as bool ----------------------------------------------------------------------------------
def test_q8k_bool_file_written_by_stock_writer(tmp_path):
    path = str(tmp_path / "bool.gguf")
    w = gguf.GGUFWriter(path, "infiniop-test")
    w.add_uint64("test_count", 1)
    w.add_string("test.0.op_name", "zeros")
    w.add_array("test.0.y.shape", [3, 5])
    w.add_array("test.0.y.strides", [1, 5])
    x = np.array([[True, False, True, True, False]] * 3)
    w.add_tensor("test.0.x", x, raw_dtype=gguf.GGMLQuantizationType.Q8_K)
    w.add_tensor("test.0.y", np.empty((0, 0), np.bool_), raw_dtype=gguf.GGMLQuantizationType.Q8_K)
    w.add_tensor("test.0.ans", np.zeros((3, 5)), raw_dtype=gguf.GGMLQuantizationType.F64)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError, match="Q8_K"):
        gguf.GGUFReader(path)  # the library refuses it
    with GGUFFile(path) as f:
        assert f.tensors["test.0.x"].dtype == DType.BOOL
        t = load_test(f, 0)
        assert t.tensors["x"].dtype == DType.BOOL and np.array_equal(t.tensors["x"].data, x)
        assert t.tensors["y"].dtype == DType.BOOL and t.tensors["y"].shape == (3, 5)
    assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_K] == (256, 292)  # library tables untouched


# -- malformed files ---------------------------------------------------------------------------------
def _truncate(n):
    return lambda b: b[:n]


MALFORMED = {
    "empty": (lambda b: b"", "empty file"),
    "bad magic": (lambda b: b"GGUG" + b[4:], "bad magic"),
    "version 1": (lambda b: b[:4] + struct.pack("<I", 1) + b[8:], "version 1"),
    "version 4": (lambda b: b[:4] + struct.pack("<I", 4) + b[8:], "unsupported GGUF version 4"),
    "big endian": (lambda b: raw_gguf([("test_count", 10, 0)], big_endian=True), "big-endian"),
    "truncated header": (_truncate(12), "truncated header"),
    "truncated kv table": (_truncate(70), "truncated key/value table"),
    "truncated tensor infos": (lambda b: b[: b.index(b"test.0.a") + 3], "truncated tensor-info table"),
    "nested arrays": (
        lambda b: raw_gguf([("test_count", 10, 0), ("x", ARRAY, (ARRAY, [(5, [1]), (5, [2])]))]),
        "nested arrays",
    ),
    "duplicate key": (lambda b: raw_gguf([("test_count", 10, 0), ("k", 5, 1), ("k", 5, 2)]), "duplicate key 'k'"),
    "duplicate tensor": (
        lambda b: raw_gguf([("test_count", 10, 0)], [("t", (1,), 0, b"\0" * 4), ("t", (1,), 0, b"\0" * 4)]),
        "duplicate tensor name 't'",
    ),
    "missing test_count": (lambda b: raw_gguf([("general.architecture", STRING, "infiniop-test")]), "missing key 'test_count'"),
    "test_count not int": (lambda b: raw_gguf([("test_count", STRING, "3")]), "test_count"),
    "other architecture": (lambda b: raw_gguf([("general.architecture", STRING, "llama"), ("test_count", 10, 0)]), "llama"),
    "bad alignment type": (lambda b: raw_gguf([("general.alignment", 10, 64), ("test_count", 10, 0)]), "alignment"),
    "truncated value": (lambda b: raw_gguf([("test_count", 10, 0)])[:50], "value of key 'test_count'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files(tmp_path, case):
    make, message = MALFORMED[case]
    path = _file(tmp_path, make(_valid()))
    with pytest.raises(FileError, match=message):
        GGUFFile(path)


def test_unknown_value_type_is_a_file_error(tmp_path):
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    bad = head + struct.pack("<Q", 10) + b"test_count" + struct.pack("<IQ", 99, 1)
    with pytest.raises(FileError, match="test_count"):
        GGUFFile(_file(tmp_path, bad))


def test_missing_file(tmp_path):
    with pytest.raises(FileError):
        GGUFFile(str(tmp_path / "nope.gguf"))


def test_version_2_and_absent_architecture_accepted(tmp_path):
    data = raw_gguf([("test_count", 10, 1), *add_kvs()], add_tensors(), version=2)
    with GGUFFile(_file(tmp_path, data)) as f:
        assert f.version == 2 and load_test(f, 0).tensors["a"].shape == (2, 3)


def test_general_alignment_honoured(tmp_path):
    kvs = [("general.alignment", 4, 64), ("test_count", 10, 1), *add_kvs()]
    data = raw_gguf(kvs, add_tensors(), alignment=64)
    with GGUFFile(_file(tmp_path, data)) as f:
        assert f.alignment == 64 and f.data_offset % 64 == 0
        t = load_test(f, 0)
        assert np.array_equal(t.tensors["a"].data, np.arange(6, dtype=np.float32).reshape(2, 3))


# -- per-test errors ----------------------------------------------------------------------------------
def _edit(kvs=None, tensors=None, drop=(), extra_kvs=(), extra_tensors=()):
    kvs = [k for k in (kvs or add_kvs()) if k[0] not in drop] + list(extra_kvs)
    tensors = [t for t in (tensors or add_tensors()) if t[0] not in drop] + list(extra_tensors)
    return raw_gguf([("test_count", 10, 1), *kvs], tensors)


def _a_replaced(ggml=0, shape=(2, 3), data=None):
    t = add_tensors()
    t[1] = ("test.0.a", shape, ggml, data if data is not None else t[1][3])
    return t


PER_TEST = {
    "missing op_name": (dict(drop=("test.0.op_name",)), "missing key 'test.0.op_name'"),
    "unknown op_name": (dict(kvs=add_kvs(op="frobnicate")), "unknown op_name 'frobnicate'"),
    "op_name not a string": (dict(drop=("test.0.op_name",), extra_kvs=[("test.0.op_name", 5, 3)]), "op_name"),
    "missing tensor": (dict(drop=("test.0.b",)), "missing tensor 'test.0.b'"),
    "unsupported ggml type": (dict(tensors=_a_replaced(ggml=2)), "unsupported ggml type 2"),
    "data past end of file": (dict(tensors=_a_replaced(shape=(2, 3000))), "runs past the end of the file"),
    "negative shape": (
        dict(drop=("test.0.c.shape",), extra_kvs=[("test.0.c.shape", ARRAY, (5, [2, -3]))]),
        "negative dimension",
    ),
    "negative stride": (dict(extra_kvs=[("test.0.a.strides", ARRAY, (5, [1, -3]))]), "negative stride"),
    "strides rank": (dict(extra_kvs=[("test.0.a.strides", ARRAY, (5, [1]))]), "1 strides for a 2-d shape"),
    "shape not ints": (dict(extra_kvs=[("test.0.a.shape", ARRAY, (6, [2.0, 3.0]))]), "integer array"),
    "bad reduction": (
        dict(extra_kvs=[("test.0.a.shape", ARRAY, (5, [4, 3])), ("test.0.a.strides", ARRAY, (5, [1, 3]))]),
        "does not match shape",
    ),
    "placeholder without shape": (dict(drop=("test.0.c.shape",)), "no 'test.0.c.shape' key"),
    "no expected value": (dict(drop=("test.0.ans",)), "no expected value"),
    "inplace not an input": (dict(extra_kvs=[("test.0.c.inplace", STRING, "ans")]), "not an input"),
    "inplace layout differs": (
        dict(extra_kvs=[("test.0.c.inplace", STRING, "a"), ("test.0.a.strides", ARRAY, (5, [1, 4]))]),
        "differ",
    ),
    "negative atol": (dict(extra_kvs=[("test.0.atol", 12, -1.0)]), "finite and >= 0"),
    "atol not a number": (dict(extra_kvs=[("test.0.atol", STRING, "1e-3")]), "must be a number"),
}


@pytest.mark.parametrize("case", sorted(PER_TEST))
def test_invalid_tests(tmp_path, case):
    kw, message = PER_TEST[case]
    with GGUFFile(_file(tmp_path, _edit(**kw))) as f, pytest.raises(TestError, match=message):
        load_test(f, 0)


def _scale_file(tmp_path, drop=(), extra=()):
    x = np.arange(4, dtype=np.float32)
    kvs = [
        ("test.0.op_name", STRING, "fake_scale"),
        ("test.0.y.shape", ARRAY, (5, [4])),
        ("test.0.y.strides", ARRAY, (5, [1])),
        ("test.0.scale", 6, 2.0),
    ]
    kvs = [k for k in kvs if k[0] not in drop] + list(extra)
    tensors = [
        ("test.0.y", (0,), 0, b""),
        ("test.0.x", (4,), 0, x.tobytes()),
        ("test.0.ans", (4,), 28, (2.0 * x.astype(np.float64)).tobytes()),
    ]
    return _file(tmp_path, raw_gguf([("test_count", 10, 1), *kvs], tensors))


ATTR_ERRORS = {
    "missing required": (dict(drop=("test.0.scale",)), "missing attribute 'test.0.scale'"),
    "float as string": (dict(drop=("test.0.scale",), extra=[("test.0.scale", STRING, "2")]), "must be a number"),
    "int out of range": (dict(extra=[("test.0.count", 10, 2**63)]), "does not fit in int64"),
    "int from float": (dict(extra=[("test.0.count", 6, 1.0)]), "must be an integer"),
    "bool from 2": (dict(extra=[("test.0.flag", 5, 2)]), "bool"),
    "ints from floats": (dict(extra=[("test.0.dims", ARRAY, (6, [1.0]))]), "integer array"),
    "str from int": (dict(extra=[("test.0.mode", 5, 1)]), "must be a string"),
    "2-element scalar": (dict(extra=[("test.0.count", ARRAY, (5, [1, 2]))]), "1-element array"),
}


@pytest.mark.parametrize("case", sorted(ATTR_ERRORS))
def test_attribute_errors(tmp_path, fake_ops, case):
    kw, message = ATTR_ERRORS[case]
    with GGUFFile(_scale_file(tmp_path, **kw)) as f, pytest.raises(TestError, match=message):
        load_test(f, 0)


def test_attribute_conversions(tmp_path, fake_ops):
    extra = [
        ("test.0.count", ARRAY, (0, [7])),  # 1-element u8 array
        ("test.0.flag", 4, 1),  # u32 1
        ("test.0.dims", 11, -2),  # scalar counts as a 1-element list
        ("test.0.mode", STRING, "tanh"),
        ("test.0.shift", 12, 0.25),  # runtime scalar
        ("test.0.unused_key", 5, 1),
    ]
    path = _scale_file(tmp_path, drop=("test.0.scale",), extra=[("test.0.alpha", 5, 3), *extra])  # alias, int -> float
    with GGUFFile(path) as f:
        t = load_test(f, 0)
    assert t.attrs == {"scale": 3.0, "count": 7, "flag": True, "dims": (-2,), "mode": "tanh"}
    assert t.runtime == {"shift": 0.25}


@pytest.mark.parametrize(
    "fn,value,want",
    [
        (as_int, Value(V.UINT64, 2**63 - 1), 2**63 - 1),
        (as_int, Value(V.INT8, -5), -5),
        (as_float, Value(V.FLOAT32, 0.5), 0.5),
        (as_float, Value(V.ARRAY, [1e-5], V.FLOAT64), 1e-5),
        (as_bool, Value(V.BOOL, True), True),
        (as_bool, Value(V.ARRAY, [0], V.INT64), False),
        (as_ints, Value(V.ARRAY, [], V.INT32), ()),
        (as_ints, Value(V.ARRAY, [3, 4], V.UINT16), (3, 4)),
        (as_str, Value(V.STRING, "none"), "none"),
    ],
)
def test_value_conversions(fn, value, want):
    assert fn(value, "k") == want


def test_format_value():
    assert format_value(float(np.float32(1e-5)), "f32") == "1e-05"
    assert format_value(0.1, "f64") == "0.1"
    assert format_value((1, 2)) == "[1, 2]"
    assert format_value(True) == "true"


# -- expected values and dialects ---------------------------------------------------------------------
def test_expected_value_precedence(tmp_path):
    shape = (2, 3)
    a = np.arange(6, dtype=np.float32).reshape(shape)
    wrong = np.full(shape, 99.0).tobytes()
    right = (a.astype(np.float64) + 1).tobytes()
    variants = {
        "ans_c beats ans": [("test.0.ans_c", shape, 28, right), ("test.0.ans", shape, 28, wrong)],
        "ans beats label": [("test.0.ans", shape, 28, right), ("test.0.lable_c", shape, 28, wrong)],
        "lable": [("test.0.lable_c", shape, 28, right)],
        "label": [("test.0.label_c", shape, 28, right)],
        "ans_fp64 ignored": [("test.0.ans", shape, 28, right), ("test.0.ans_fp64", shape, 28, wrong)],
    }
    base = [t for t in add_tensors() if not t[0].endswith("ans")]
    for name, extra in variants.items():
        data = raw_gguf([("test_count", 10, 1), *add_kvs()], base + extra)
        with GGUFFile(_file(tmp_path, data, "v.gguf")) as f:
            t = load_test(f, 0)
        assert np.array_equal(t.expected["c"], a + 1), name


def test_named_output_style(tmp_path):
    """No ans: the output's own data is the expected value, shapes from `<name>_shape`,
    dtype from the first input, contiguous strides; `<name>_strides` keys are ignored."""
    a = np.arange(6, dtype=np.float16).reshape(2, 3)
    kvs = [
        ("test_count", 10, 1),
        ("test.0.op_name", STRING, "add"),
        ("test.0.a_shape", ARRAY, (5, [2, 3])),
        ("test.0.b_shape", ARRAY, (5, [2, 3])),
        ("test.0.c_shape", ARRAY, (5, [2, 3])),
        ("test.0.c_strides", ARRAY, (5, [7, 1])),
    ]
    tensors = [
        ("test.0.a", (2, 3), 1, a.tobytes()),
        ("test.0.b", (2, 3), 1, a.tobytes()),
        ("test.0.c", (2, 3), 28, (2 * a.astype(np.float64)).tobytes()),
    ]
    with GGUFFile(_file(tmp_path, raw_gguf(kvs, tensors))) as f:
        t = load_test(f, 0)
    assert t.style == "named"
    c = t.tensors["c"]
    assert (c.dtype, c.shape, c.strides, c.role) == (DType.F16, (2, 3), (3, 1), "out")
    assert np.array_equal(t.expected["c"], 2 * a.astype(np.float64))


def test_misspelled_strides_alias_and_ignored_keys(tmp_path):
    extra = [
        ("test.0.a_strides.strides", ARRAY, (5, [1, 4])),
        ("test.5.op_name", STRING, "nonsense"),  # index >= test_count: ignored
        ("test.0.whatever", 5, 1),
    ]
    with GGUFFile(_file(tmp_path, _edit(extra_kvs=extra))) as f:
        assert f.test_count == 1
        t = load_test(f, 0)
    assert t.tensors["a"].strides == (4, 1)


def test_unreduced_zero_stride_reads_index_zero(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    extra = [("test.0.a.strides", ARRAY, (5, [1, 0]))]  # natural (0, 1): dim 0 broadcast
    with GGUFFile(_file(tmp_path, _edit(tensors=add_tensors(a=a), extra_kvs=extra))) as f:
        t = load_test(f, 0)
    assert np.array_equal(t.tensors["a"].data, np.broadcast_to(a[0], (2, 3)))


def test_dialect_hooks(tmp_path, fake_ops):
    """prepare() renames before binding, adapt() adjusts after; write() renames for the file."""
    x = np.arange(3, dtype=np.float32)
    rec = TestRecord("fake_acc")
    rec.add_inout("acc", np.full(3, 5.0, np.float32), DType.F32)
    rec.add_input("x", x, DType.F32)
    rec.add_expected("ans", x + 5.0)
    fake_ops["fake_acc"].gguf.write(rec)
    assert "source" in rec.tensors and "x.shape" not in rec.keys and "source.shape" in rec.keys
    rec2 = TestRecord("fake_acc")
    rec2.add_output("acc", (3,), None, DType.F32)
    rec2.add_input("x", x, DType.F32)
    rec2.add_expected("ans", x + 2.0)
    rec3 = TestRecord("fake_acc")
    rec3.set("zero_acc", True, "bool")
    rec3.add_inout("acc", np.full(3, 5.0, np.float32), DType.F32)
    rec3.add_input("x", x, DType.F32)
    rec3.add_expected("ans", x)
    path = write_one(tmp_path / "acc.gguf", rec, rec2, rec3)
    with GGUFFile(path) as f:
        t0, t1, t2 = (load_test(f, i) for i in range(3))
    assert np.array_equal(t0.tensors["x"].data, x) and np.array_equal(t0.tensors["acc"].data, np.full(3, 5.0))
    assert t1.tensors["acc"].data is None and t1.tensors["acc"].fill == 2.0  # TensorRole.init
    assert t2.tensors["acc"].data is None and t2.tensors["acc"].fill == 0.0  # the dialect's adapt()


def test_optional_output_absent_and_unchecked(tmp_path, fake_ops):
    x = np.arange(4, dtype=np.float32)
    rec = TestRecord("fake_two")
    rec.add_output("y", (4,), None, DType.F32)
    rec.add_output("idx", (4,), None, DType.I32)
    rec.add_input("x", x, DType.F32)
    rec.add_expected("ans_y", x)
    with GGUFFile(write_one(tmp_path / "two.gguf", rec)) as f:
        t = load_test(f, 0)
    assert t.tensors["extra"] is None and t.tensors["idx"].unchecked and not t.tensors["y"].unchecked


# -- upstream generators' quirks ----------------------------------------------------------------------
def _fixture(tmp_path, op: str) -> str:
    import upstream_fixtures

    path = str(tmp_path / f"{op}.gguf")
    upstream_fixtures.FIXTURES[op](path, np.random.default_rng(0))
    return path


def test_put_tensor_keeps_f32():
    """F32's ggml code is 0: a derived F32 tensor must not become 'ggml type -1'."""
    from infiniop_py.gguf import RawTest

    class _File:
        def test_items(self, index):
            return {}, {}

    raw = RawTest(_File(), 0, "scatter_")
    for dtype, code in ((DType.F32, 0), (DType.F16, 1), (DType.BF16, 30), (DType.BOOL, 15)):
        raw.put_tensor("t", np.zeros(2, np.float32), dtype)
        assert raw.tensor("t").ggml_type == code and raw.tensor("t").dtype is dtype


def test_scatter_inplace_dialect_f32(tmp_path):
    """The contributors' `scatter_` files: every F32 case (and F16) binds and its updates are F32."""
    path = _fixture(tmp_path, "scatter")
    with GGUFFile(path) as f:
        tests = [load_test(f, i) for i in range(f.test_count)]
    assert {t.tensors["updates"].dtype for t in tests} == {DType.F32, DType.F16}
    t = tests[1]  # (3, 4, 5) output, source (3, 2, 5) along dim 1
    assert t.op_name == "scatter_" and t.tensors["output"].inplace == "input" and t.attrs["axis"] == 1
    assert t.tensors["updates"].shape == (3, 2, 5) and t.expected["output"].shape == (3, 4, 5)


def test_linear_strides_in_natural_order(tmp_path):
    """linear / linear_backward: strides overlapping as read but not reversed are taken reversed;
    a layout overlapping either way (w (3, 4), strides (6, 3)) stays as read."""
    with GGUFFile(_fixture(tmp_path, "linear")) as f:
        t1, t10, t11 = (load_test(f, i) for i in (1, 10, 11))
    assert t1.tensors["x"].strides == (4, 1)  # x (5, 4), file [4, 1]: (1, 4) overlaps, (4, 1) does not
    assert t1.tensors["w"].strides == (1, 4)  # w (3, 4), file [4, 1]: (1, 4) does not overlap: as read
    assert t1.tensors["y"].strides == (3, 1)  # written reversed: read as is
    assert t10.tensors["x"].strides == (2, 8)  # (8, 2) read as (2, 8) overlaps neither way: as read
    assert t10.tensors["w"].strides == (3, 6)  # overlapping either way: as read (ILL-DEFINED)
    assert t11.tensors["w"].strides == (8, 2) and t11.tensors["x"].strides == (2, 8, 24)
    with GGUFFile(_fixture(tmp_path, "linear_backward")) as f:
        t = load_test(f, 9)
    assert t.tensors["grad_w"].strides == (5, 1) and t.tensors["w"].strides == (5, 1)  # file: [5, 1]
    assert t.tensors["grad_b"] is None and t.tensors["grad_y"].strides == (1, 3, 21)


def test_strides_left_alone_outside_linear(tmp_path):
    """Only the linear dialects reverse strides: elsewhere an overlapping layout stays as read."""
    kvs = add_kvs(shape=(3, 2)) + [("test.0.a.strides", ARRAY, (5, [2, 1]))]  # natural order: (1, 2) overlaps
    with GGUFFile(_file(tmp_path, _edit(kvs=kvs, tensors=add_tensors(shape=(3, 2))))) as f:
        assert load_test(f, 0).tensors["a"].strides == (1, 2)


def test_placeholder_shape_from_ans(tmp_path):
    """batch_norm_backward files write no grad_bias.shape: it comes from ans_grad_bias."""
    with GGUFFile(_fixture(tmp_path, "batch_norm_backward")) as f:
        assert "test.0.grad_bias.shape" not in f.fields and f.tensors["test.0.grad_bias"].shape == (0,)
        t = load_test(f, 0)
    assert t.tensors["grad_bias"].shape == (6,) and t.tensors["grad_bias"].strides == (1,)
    assert t.expected["grad_bias"].shape == (6,) and t.tensors["grad_input"].shape == (2, 6, 4)


def test_overlap_detection():
    from infiniop_py.gguf.overlap import conflicting_cells, self_overlaps

    assert self_overlaps((2, 3, 4), (10, 4, 1)) is True  # the public norm files' layout
    assert self_overlaps((3, 4), (6, 3)) is True and self_overlaps((3, 4), (3, 6)) is True
    assert self_overlaps((5, 4), (1, 4)) is True and self_overlaps((4, 5), (1, 4)) is False
    assert self_overlaps((13, 4), (10, 1)) is False and self_overlaps((2, 2), (1, 2)) is False
    assert self_overlaps((3, 3), (2, 3)) is False  # the sorted-strides test cannot clear it; exact check
    assert self_overlaps((4, 1, 3), (0, 7, 1)) is True and self_overlaps((1, 3), (0, 1)) is False
    assert self_overlaps((0, 5), (0, 0)) is False and self_overlaps((), ()) is False
    assert self_overlaps((3000, 3000), (2, 3)) is None  # too large to decide exactly
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert conflicting_cells(x, (3, 4), (4, 1)) == 0
    assert conflicting_cells(x, (3, 4), (3, 6)) == 3  # offsets 6, 12, 15 are each shared by two elements
    same = np.tile(np.arange(4, dtype=np.float16), (3, 1))  # rows agree: (3, 4) with strides (0, 1) or (1, 1)
    assert conflicting_cells(same, (3, 4), (0, 1)) == 0
    assert conflicting_cells(np.broadcast_to(x[:1], (3, 4)), (3, 4), (0, 1)) == 0
    shifted = np.array([[0, 1, 2], [1, 2, 3]], np.int8)  # (2, 3) with strides (1, 1): x[i, j] at i + j
    assert conflicting_cells(shifted, (2, 3), (1, 1)) == 0
    assert conflicting_cells(shifted + np.array([[0], [1]], np.int8), (2, 3), (1, 1)) == 2
    nan = np.array([np.nan, np.nan], np.float32)
    assert conflicting_cells(nan, (2,), (0,)) == 0 and conflicting_cells(nan, (2,), (1,)) == 0


# -- generators -------------------------------------------------------------------------------------
def test_generator_files(tmp_path):
    from gguf_cases import generator_for

    gen = generator_for("add")
    n = gen.write(tmp_path / "add.gguf", "quick", base_seed=3)
    assert n > 20
    with GGUFFile(tmp_path / "add.gguf") as f:
        assert f.description == "add, quick suite" and f.test_count == n
        dtypes = {t.dtype for t in f.tensors.values()}
        assert DType.U8 not in dtypes and None not in dtypes
        t = load_test(f, 0)
        assert t.seed is not None and t.description
        assert all(v.subtype == V.INT64 for k, v in f.fields.items() if k.endswith((".shape", ".strides")))
        assert {f.tensors[f"test.{i}.ans"].ggml_type for i in range(n)} <= {28, 24, 25, 26, 27}


def test_generator_check_detects_changes(tmp_path, capsys):
    from gguf_cases.__main__ import main

    out = str(tmp_path / "g")
    assert main(["--out", out, "--check", "zeros"]) == 0  # nothing built yet: two fresh builds agree
    assert not (tmp_path / "g").exists()
    assert main(["--out", out, "rearrange", "zeros"]) == 0
    first = (tmp_path / "g" / "quick" / "rearrange.gguf").read_bytes()
    assert main(["--out", out, "--check", "rearrange", "zeros"]) == 0
    assert main(["--out", out, "rearrange"]) == 0
    assert (tmp_path / "g" / "quick" / "rearrange.gguf").read_bytes() == first  # byte-identical rebuild
    p = tmp_path / "g" / "quick" / "zeros.gguf"
    data = bytearray(p.read_bytes())
    data[-1] ^= 0xFF
    p.write_bytes(bytes(data))
    assert main(["--out", out, "--check", "rearrange", "zeros"]) == 1
    assert "zeros.gguf: differs" in capsys.readouterr().out
    assert main(["--out", out, "--seed", "1", "--check", "zeros"]) == 1  # another seed, other bytes
    assert main(["--out", out, "nonexistent_op"]) == 2


def test_write_file_is_atomic_on_error(tmp_path):
    rec = TestRecord("add")
    rec.tensors["bad"] = (np.zeros(2, np.uint8), DType.U8)
    with pytest.raises(WriteError):
        write_file(tmp_path / "x.gguf", [rec])
    assert list(tmp_path.iterdir()) == []
