"""The per-operator hook for GGUF file quirks (``OpSpec.gguf``; see docs/gguf.md).

The generic rules of gguf.md §2-§3 cover most operators with no hook at all: tensor and
attribute aliases come from the spec (``TensorRole.aliases``, ``Attr.aliases``, ``gguf_names``),
in/out tensors start from stored data or ``TensorRole.init``, the named-output style,
``ans``/``ans_<o>``/``lable_<o>``/``label_<o>`` expected values, ``.inplace``, and
``<name>_strides.strides`` spellings are all handled by the reader. A dialect is for what is left:
a file form that must be rewritten before or after that binding, or upstream key spellings and
value types the generator must reproduce.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .testcase import ParsedTest, RawTest
    from .writer import TestRecord


class GGUFDialect:
    """Base class: every hook does nothing. Subclass, override what you need, and set
    ``SPEC = OpSpec(..., gguf=MyDialect())``.

    Attributes:
        attr_types: GGUF value type the generator writes for an attribute or runtime scalar,
            by name: 'f32', 'f64', 'i32', 'i64', 'u64', 'bool', 'str' (array kinds take the element
            type: 'i32' or 'i64'). Unlisted: int -> INT32 (INT64 if it does not fit), float ->
            FLOAT32, bool -> BOOL, ints -> INT32 array, str -> STRING, which is what upstream's
            generators write. References are computed from the value as stored.
        output_dtype_from: in the named-output style (§3.1) outputs are allocated in this
            input's dtype (default: the first declared input).
    """

    attr_types: Mapping[str, str] = {}
    output_dtype_from: str | None = None

    def prepare(self, raw: RawTest) -> None:
        """Before binding: rewrite the test's raw keys and tensors.

        ``raw.rename(old, new)`` moves a tensor with its ``.shape``/``.strides``/``.inplace``
        keys (or a plain key); ``raw.drop(name)`` removes one; ``raw.put_tensor(name, array, dtype)``
        adds a derived tensor; ``raw.value(name)``, ``raw.tensor(name)``, ``raw.data(name)`` read.
        ``raw.op_name`` is the name as written in the file (e.g. ``scatter_``); ``raw.notes`` is a
        dict for passing per-test state on to :meth:`adapt` (one dialect serves every test).
        """

    def adapt(self, test: ParsedTest, raw: RawTest) -> None:
        """After binding: adjust the parsed test in place.

        For example set ``test.tensors['output'].data = None`` and ``.fill = 0.0`` (start an in/out
        tensor from zeros), ``.inplace = 'input'`` (share a buffer), replace an input's ``data``,
        change ``test.attrs``, or add/remove entries of ``test.expected``. Raise
        ``infiniop_py.gguf.TestError`` for INVALID TEST.
        """

    def write(self, record: TestRecord) -> None:
        """Generator: rename or add keys so the file matches upstream's layout
        (``record.rename('ans', 'lable_values')``, ``record.set('voc', 512, 'i32')``)."""


DEFAULT = GGUFDialect()


def dialect_of(spec) -> GGUFDialect:
    d = getattr(spec, "gguf", None)
    return d if d is not None else DEFAULT
