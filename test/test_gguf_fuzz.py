"""Malformed and hostile GGUF files against ``infiniop-test`` (gguf.md §4.3, §4.9).

Small valid files, built with the project's writer from the operators' own case tables, are cut at
every structural boundary and at random offsets, have bytes flipped, value types changed, counts,
lengths, dimensions, offsets and shape entries set to absurd values, and keys or tensor infos
deleted. Each mutant goes through the runner's ``main()`` in-process, and must give exit code 0, 1
or 2 with a per-file or per-test error, never a traceback, and never allocate more than a bounded
amount of memory. The mutations are seeded, so every run checks the same files.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import struct
import time
import tracemalloc

import numpy as np
import pytest
from test_gguf_helpers import ARRAY, STRING, add_tensors, raw_gguf

from infiniop_py import cli
from infiniop_py.gguf import FileError, GGUFFile, TestError, load_test, write_file
from infiniop_py.gguf.testcase import ELEMENT_FACTOR, MIN_ELEMENT_LIMIT
from infiniop_py.gguf.values import as_int

SEED = 20261125
MEMORY_LIMIT = 200 * 2**20  # bytes traced during one run of a file of a few kB
TIME_LIMIT = 10.0  # seconds for one mutant
FAILURE_STATUSES = {"WRONG ANSWER", "OP CREATION FAILED", "EXECUTION FAILED", "INVALID TEST"}

# scalar value types: GGUF code -> struct format
_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
ABSURD_U64 = (2**32, 2**40, 2**63 - 1, 2**63, 2**64 - 1, 2**64 - 2**31)  # the last: -2^31 as unsigned
ABSURD_DIMS = (2**31, 2**40, 2**62, 2**63 - 1, -1, -(2**63))


# -- where the structures of a file lie ----------------------------------------------------------------
class Layout:
    """Offsets of a *valid* little-endian GGUF file's parts (for aiming the mutations)."""

    def __init__(self, data: bytes):
        self.data = data
        self.kvs: list[dict] = []
        self.tensors: list[dict] = []
        n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
        pos = 24
        for _ in range(n_kv):
            kv = {"start": pos, "key_len": pos}
            klen = struct.unpack_from("<Q", data, pos)[0]
            kv["key"] = data[pos + 8 : pos + 8 + klen].decode()
            pos += 8 + klen
            kv["type"] = pos
            vtype = struct.unpack_from("<I", data, pos)[0]
            kv["vtype"] = vtype
            pos += 4
            kv["value"] = pos
            pos = self._skip_value(vtype, pos, kv)
            kv["end"] = pos
            self.kvs.append(kv)
        for _ in range(n_tensors):
            t = {"start": pos}
            nlen = struct.unpack_from("<Q", data, pos)[0]
            t["name"] = data[pos + 8 : pos + 8 + nlen].decode()
            pos += 8 + nlen
            t["n_dims"] = pos
            nd = struct.unpack_from("<I", data, pos)[0]
            pos += 4
            t["dims"] = [pos + 8 * k for k in range(nd)]
            pos += 8 * nd
            t["type"] = pos
            t["offset"] = pos + 4
            pos += 12
            t["end"] = pos
            self.tensors.append(t)
        self.info_end = pos
        self.data_start = pos + (-pos % 32)
        for t in self.tensors:
            t["data"] = self.data_start + struct.unpack_from("<Q", data, t["offset"])[0]

    def _skip_value(self, vtype: int, pos: int, kv: dict | None = None) -> int:
        if vtype == STRING:
            return pos + 8 + struct.unpack_from("<Q", self.data, pos)[0]
        if vtype == ARRAY:
            sub, n = struct.unpack_from("<IQ", self.data, pos)
            if kv is not None:
                kv.update(sub=sub, sub_type=pos, length=pos + 4, items=pos + 12, count=n)
            pos += 12
            for _ in range(n):
                pos = self._skip_value(sub, pos)
            return pos
        return pos + struct.calcsize("<" + _FMT[vtype])

    def boundaries(self) -> list[int]:
        cuts = {0, 4, 8, 16, 24, self.info_end, self.data_start, len(self.data) - 1}
        for kv in self.kvs:
            cuts |= {kv["start"], kv["key_len"] + 8, kv["type"], kv["value"], kv["end"]}
            if "items" in kv:
                cuts |= {kv["sub_type"], kv["length"], kv["items"]}
        for t in self.tensors:
            cuts |= {t["start"], t["n_dims"], *t["dims"], t["type"], t["offset"], t["end"], t["data"]}
        return sorted(c for c in cuts if 0 <= c < len(self.data))


def _put(data: bytes, offset: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into("<" + fmt, b, offset, value)
    return bytes(b)


def mutants(data: bytes, rng: random.Random):
    """(label, bytes) for every mutation of one valid file."""
    lay = Layout(data)
    n = len(data)
    # truncation at every structural boundary (and one byte either side), then at random offsets
    cuts = set()
    for c in lay.boundaries():
        cuts |= {c - 1, c, c + 1}
    cuts |= {rng.randrange(n) for _ in range(20)}
    for c in sorted(x for x in cuts if 0 <= x < n):
        yield f"truncate@{c}", data[:c]
    # random byte flips: single bytes, and bursts of 4
    for _ in range(40):
        b = bytearray(data)
        at = rng.randrange(n)
        for k in range(at, min(n, at + rng.choice((1, 1, 4)))):
            b[k] ^= rng.randrange(1, 256)
        yield f"flip@{at}", bytes(b)
    # header counts
    for field, off in (("tensor_count", 8), ("kv_count", 16)):
        for v in (0, 2**40, 2**63, 2**64 - 1):
            yield f"{field}={v}", _put(data, off, "Q", v)
    for kv in lay.kvs:
        key = kv["key"]
        # another value type (same bytes), and an unknown one
        for t in {*rng.sample(sorted(set(range(13)) - {kv["vtype"]}), 3), 99}:
            yield f"{key}:type={t}", _put(data, kv["type"], "I", t)
        # absurd key length
        yield f"{key}:key_len=2^63", _put(data, kv["key_len"], "Q", 2**63)
        # deleted
        cut = data[: kv["start"]] + data[kv["end"] :]
        yield f"{key}:deleted", _put(cut, 16, "Q", len(lay.kvs) - 1)
        if kv["vtype"] == STRING:
            yield f"{key}:strlen=2^40", _put(data, kv["value"], "Q", 2**40)
        elif kv["vtype"] == ARRAY:
            for t in (STRING, ARRAY, 99, rng.choice([c for c in _FMT if c != kv["sub"]])):
                yield f"{key}:subtype={t}", _put(data, kv["sub_type"], "I", t)
            for v in (kv["count"] + 1, 2**40, 2**63, 2**64 - 1):
                yield f"{key}:length={v}", _put(data, kv["length"], "Q", v)
            if kv["sub"] in (10, 11) and kv["count"]:  # shape/strides entries (INT64 arrays)
                for k in range(kv["count"]):
                    for v in rng.sample(ABSURD_DIMS, 2):
                        yield f"{key}[{k}]={v}", _put(data, kv["items"] + 8 * k, "q", v)
        elif kv["vtype"] in (4, 5, 10, 11):  # integer scalars (test_count, seeds, int attributes)
            fmt = _FMT[kv["vtype"]]
            for v in ABSURD_U64 if fmt in "Qq" else (2**31 - 1, 2**32 - 1):
                if fmt.islower() and v >= 2 ** (8 * struct.calcsize(fmt) - 1):
                    v -= 2 ** (8 * struct.calcsize(fmt))
                yield f"{key}={v}", _put(data, kv["value"], fmt, v)
    for t in lay.tensors:
        name = t["name"]
        for d in t["dims"]:
            for v in rng.sample(ABSURD_U64, 2):
                yield f"{name}:dim@{d}={v}", _put(data, d, "Q", v)
        yield f"{name}:n_dims=2^31", _put(data, t["n_dims"], "I", 2**31)
        yield f"{name}:n_dims=+1", _put(data, t["n_dims"], "I", len(t["dims"]) + 1)
        for v in (2, 13, 99, 2**31):
            yield f"{name}:ggml={v}", _put(data, t["type"], "I", v)
        for v in (1, 2**40, 2**64 - 32):
            yield f"{name}:offset={v}", _put(data, t["offset"], "Q", v)
        cut = data[: t["start"]] + data[t["end"] :]
        yield f"{name}:info deleted", _put(cut, 8, "Q", len(lay.tensors) - 1)


# -- the valid files -------------------------------------------------------------------------------
def _smallest(op: str, k: int):
    from gguf_cases import generator_for
    from infiniop_py.testing.cases import case_seed

    gen = generator_for(op)
    inst = list(enumerate(gen.instances("quick")))

    def sizes(item):
        case, dt = item[1]
        return [int(np.prod(tc.resolved(dt)[0])) for tc in case.tensors.values() if tc is not None]

    inst = sorted((x for x in inst if min(sizes(x)) > 0), key=lambda x: sum(sizes(x)))  # no empty tensors
    return [gen.record(case, dt, case_seed(0, gen.op, i)) for i, (case, dt) in inst[:k]]


BASES = {"add": 2, "rms_norm": 1, "where": 1, "random_sample": 1, "linear": 1, "gemm": 1}  # op -> tests per file


def _upstream_zeros(path: str) -> None:
    """A bool zeros test as upstream's generators write it: the stock writer, Q8_K for bool."""
    import upstream_fixtures as up
    from gguf import GGMLQuantizationType

    w = up.UpstreamStyleWriter(path)

    @up._test("zeros")
    def t(w):
        w.array("x.shape", [2, 3])
        w.array("y.shape", [2, 3])
        w.array("y.strides", up.rev([3, 1]))
        w.tensor("x", np.array([[True, False, True], [False, True, True]]))
        w.tensor("y", np.empty((0, 0), dtype=np.bool_))
        w.tensor("ans", np.zeros((2, 3)), GGMLQuantizationType.F64)

    w.add(t)
    w.save()


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    pytest.importorskip("torch")  # the generators compute references with it
    root = tmp_path_factory.mktemp("fuzz_bases")
    out = {}
    for op, k in BASES.items():
        path = root / f"{op}.gguf"
        write_file(path, _smallest(op, k), f"{op}, fuzz base")
        out[op] = path.read_bytes()
    _upstream_zeros(str(root / "zeros.gguf"))
    out["upstream zeros"] = (root / "zeros.gguf").read_bytes()
    return out


def run_file(path: str, json_path: str) -> tuple[int, str, str, dict]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([path, "--cpu", "--quiet", "--json", json_path])
    with open(json_path, encoding="utf-8") as f:
        return code, out.getvalue(), err.getvalue(), json.load(f)


def check_result(label: str, code: int, out: str, err: str, result: dict) -> None:
    where = f"{label}: exit {code}\n{out[-2000:]}\n{err[-2000:]}"
    assert code in (0, 1, 2), where
    assert "Traceback" not in out + err and "internal error" not in err, where
    assert result["summary"]["exit_code"] == code, where
    (entry,) = result["files"]
    if code == 2:
        assert entry["error"], where
        assert "\n" not in entry["error"] and len(entry["error"]) < 1000, where
        assert f"Error: {entry['path']}: {entry['error']}" in err, where
    elif code == 1:
        failed = [t for t in entry["tests"] if t["status"] in FAILURE_STATUSES]
        assert failed and all(t["error"] for t in failed), where
    for t in entry["tests"]:
        assert t["error"] is None or ("\n" not in t["error"] and len(t["error"]) < 2000), where


def test_bases_pass(bases, tmp_path):
    for op, data in bases.items():
        p = tmp_path / f"{op}.gguf"
        p.write_bytes(data)
        code, out, err, result = run_file(str(p), str(tmp_path / "r.json"))
        assert code == 0 and result["summary"]["passed"] == BASES.get(op, 1), (op, out, err)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy kernels on garbage values (overflow, NaN)
def test_fuzz(bases, tmp_path):
    """Every mutant of every base file: exit 0/1/2, an error reported, no traceback, bounded memory."""
    rng = random.Random(SEED)
    cases, worst_mem, worst_time, codes = 0, (0, ""), (0.0, ""), {0: 0, 1: 0, 2: 0}
    problems: list[str] = []
    path, jpath = str(tmp_path / "m.gguf"), str(tmp_path / "m.json")
    started = time.perf_counter()
    tracemalloc.start()
    try:
        for op, data in bases.items():
            for label, mutant in mutants(data, rng):
                label = f"{op}: {label}"
                with open(path, "wb") as f:
                    f.write(mutant)
                tracemalloc.reset_peak()
                t0 = time.perf_counter()
                code, out, err, result = run_file(path, jpath)
                dt = time.perf_counter() - t0
                peak = tracemalloc.get_traced_memory()[1]
                try:
                    check_result(label, code, out, err, result)
                    assert peak < MEMORY_LIMIT, f"{label}: {peak / 2**20:.1f} MiB traced"
                    assert dt < TIME_LIMIT, f"{label}: {dt:.1f} s"
                except AssertionError as exc:
                    problems.append(str(exc).partition("\nassert")[0])
                worst_mem = max(worst_mem, (peak, label))
                worst_time = max(worst_time, (dt, label))
                codes[code] = codes.get(code, 0) + 1
                cases += 1
    finally:
        tracemalloc.stop()
    total = time.perf_counter() - started
    print(
        f"\n{cases} mutants in {total:.1f} s; exit codes {codes}; peak traced "
        f"{worst_mem[0] / 2**20:.1f} MiB ({worst_mem[1]}); slowest {worst_time[0]:.2f} s ({worst_time[1]})"
    )
    assert not problems, f"{len(problems)} of {cases} mutants mishandled:\n" + "\n".join(problems[:10])
    assert cases > 500 and codes[1] and codes[2]


# -- the bounds themselves -------------------------------------------------------------------------
def _add_file(tmp_path, c_shape=(2, 3), c_strides=None, test_count=1, extra=()) -> str:
    c_strides = list(c_strides) if c_strides is not None else [1, c_shape[-1]]
    kvs = [
        ("general.architecture", STRING, "infiniop-test"),
        ("test_count", 10, test_count),
        ("test.0.op_name", STRING, "add"),
        ("test.0.c.shape", ARRAY, (11, list(c_shape))),
        ("test.0.c.strides", ARRAY, (11, c_strides)),
        *extra,
    ]
    p = tmp_path / "t.gguf"
    p.write_bytes(raw_gguf(kvs, add_tensors()))
    return str(p)


@pytest.mark.parametrize("count", [2, 5_000_000, 2**40, 2**63, 2**64 - 1])
def test_test_count_beyond_the_tests_present_is_a_file_error(tmp_path, count):
    with pytest.raises(FileError, match=f"key 'test_count' is {count}, but only 1 tests have keys"):
        GGUFFile(_add_file(tmp_path, test_count=count))


def test_test_count_counts_tests_with_any_key(tmp_path):
    """Test 1 has only a description: the count is honoured, and test 1 alone is INVALID TEST."""
    path = _add_file(tmp_path, test_count=2, extra=[("test.1.description", STRING, "lonely")])
    with GGUFFile(path) as f:
        assert f.test_count == 2
        load_test(f, 0)
        with pytest.raises(TestError, match="missing key 'test.1.op_name'"):
            load_test(f, 1)


@pytest.mark.parametrize(
    "shape, strides, message",
    [
        ((2**15, 2**14), None, r"key 'test.0.c.shape': shape \[32768, 16384\] has 536870912 elements"),
        ((2**16, 2**16), None, "has 4294967296 elements"),
        ((2**62, 2**62), None, "dimension 4611686018427387904"),
        ((0, 2**40), None, "dimension 1099511627776"),
        ((2, 3), (1, 2**40), r"key 'test.0.c.strides': stride 1099511627776"),
        ((4, 2**22), (1, 2**24), r"key 'test.0.c.strides': shape \[4, 4194304\] with strides \[16777216, 1\] spans"),
    ],
)
def test_absurd_output_shapes_are_invalid_tests(tmp_path, shape, strides, message):
    limit = max(MIN_ELEMENT_LIMIT, ELEMENT_FACTOR * 18)  # a, b (2x3 each) and ans (2x3) are stored
    with GGUFFile(_add_file(tmp_path, shape, strides)) as f, pytest.raises(TestError, match=message) as e:
        load_test(f, 0)
    assert f"= {limit}" in str(e.value)


def test_absurd_shape_costs_no_memory(tmp_path):
    """A (2^16, 2^16) output used to be allocated (16 GiB) before the operator rejected it."""
    path = _add_file(tmp_path, (2**16, 2**16))
    tracemalloc.start()
    try:
        code, out, err, result = run_file(path, str(tmp_path / "r.json"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 1 and peak < 20 * 2**20, peak
    (t,) = result["files"][0]["tests"]
    assert t["status"] == "INVALID TEST" and "key 'test.0.c.shape'" in t["error"]


@pytest.mark.parametrize("vtype, value", [(0, 7), (1, -100), (11, -(2**40))])
def test_large_scalar_array_stays_packed(tmp_path, vtype, value):
    """An array of a million values is parsed as one view and kept packed (a 1 MB u8 array once
    took 20 s and 200 MB, one NumPy view per element); it still reads as Python scalars."""
    extra = [("junk", ARRAY, (vtype, [value] * 1_000_000)), ("test.0.dims", ARRAY, (vtype, [value] * 99))]
    path = _add_file(tmp_path, extra=extra)
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        f = GGUFFile(path)
        dt = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20 and dt < 1.0, (peak, dt)  # the file holds 1 to 8 MB
    with f:
        junk = f.fields["junk"].value
        assert len(junk) == 1_000_000 and junk[0] == value and junk[-1] == value and type(junk[5]) is int
        assert sum(1 for _ in junk) == 1_000_000 and junk == [value] * 1_000_000
        assert repr(junk) == f"[{', '.join([str(value)] * 8)}, ... (1000000 items)]"
        assert load_test(f, 0).tensors["a"].shape == (2, 3)
        with pytest.raises(TestError, match=r"\.\.\. \(99 items\)\]"):
            as_int(f.fields["test.0.dims"], "test.0.dims")


def test_stored_data_outside_the_file(tmp_path):
    kvs = [("test_count", 10, 1), ("test.0.op_name", STRING, "add")]
    kvs += [("test.0.c.shape", ARRAY, (11, [2, 3])), ("test.0.c.strides", ARRAY, (11, [1, 3]))]
    data = raw_gguf(kvs, add_tensors())
    p = tmp_path / "t.gguf"
    p.write_bytes(data[: Layout(data).tensors[-1]["data"] + 8])  # cut inside the last tensor (ans)
    with GGUFFile(str(p)) as f, pytest.raises(TestError, match="runs past the end of the file"):
        load_test(f, 0)


@pytest.mark.parametrize(
    "kv, message",
    [
        (("k\nx", 99, None), r"key 'k\\nx' at offset 24 has unknown value type 99"),
        (("k", ARRAY, (99, [])), "bad value of key 'k' at offset 24: unknown array element type 99"),
        (("k", ARRAY, (ARRAY, [])), "nested arrays are not allowed"),
    ],
)
def test_value_type_errors_are_one_clear_line(tmp_path, kv, message):
    key, vtype, value = kv
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + struct.pack("<Q", len(key)) + key.encode()
    if value is None:
        data = head + struct.pack("<I", vtype) + b"\0" * 8
    else:
        data = head + struct.pack("<IIQ", vtype, value[0], 0)
    p = tmp_path / "t.gguf"
    p.write_bytes(data + raw_gguf([("test_count", 10, 0)])[24:])
    with pytest.raises(FileError, match=message) as e:
        GGUFFile(str(p))
    assert "\n" not in str(e.value)


def test_unknown_op_name_is_shown_on_one_line(tmp_path):
    kvs = [("test_count", 10, 1), ("test.0.op_name", STRING, "no\nsuch")]
    p = tmp_path / "t.gguf"
    p.write_bytes(raw_gguf(kvs))
    with GGUFFile(str(p)) as f, pytest.raises(TestError, match=r"unknown op_name 'no\\nsuch'"):
        load_test(f, 0)


def test_non_ascii_digit_index_is_ignored(tmp_path):
    """``test.².x`` is not test 2 (``int('²')`` raises)."""
    path = _add_file(tmp_path, extra=[("test.\u00b2.op_name", STRING, "add")])
    with GGUFFile(path) as f:
        assert f.test_count == 1
        load_test(f, 0)
