"""GGUF test-case files: reading, writing, and binding tests to operators (gguf.md).

>>> from infiniop_py.gguf import GGUFFile, load_test
>>> with GGUFFile("build/gguf/quick/add.gguf") as f:
...     test = load_test(f, 0)          # ParsedTest: tensors, attrs, expected values
>>> from infiniop_py.gguf import TestRecord, write_file
>>> rec = TestRecord("add"); rec.add_input("a", a, DType.F32); ...
>>> write_file("add.gguf", [rec], "add, my cases")

Per-operator quirks go through :class:`GGUFDialect` (``OpSpec.gguf``); see docs/gguf.md.
"""

from .container import ARCHITECTURE, FileError, GGUFFile, StoredTensor, TestError, Value
from .dialect import GGUFDialect
from .testcase import ParsedTest, RawTest, TestTensor, load_test, test_header
from .writer import TestRecord, WriteError, default_vtype, storable, stored_value, write_file

__all__ = [
    "ARCHITECTURE",
    "FileError",
    "GGUFDialect",
    "GGUFFile",
    "ParsedTest",
    "RawTest",
    "StoredTensor",
    "TestError",
    "TestRecord",
    "TestTensor",
    "Value",
    "WriteError",
    "default_vtype",
    "load_test",
    "storable",
    "stored_value",
    "test_header",
    "write_file",
]
