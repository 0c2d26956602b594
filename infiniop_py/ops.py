"""Pythonic conveniences: ``iop.ops.add(a, b)`` allocates the output and caches descriptors.

Every call goes through the same descriptors as the lifecycle API; the ``CACHE_LIMIT`` most
recently used ones are kept, and an evicted one is destroyed. Inputs are NumPy arrays
(CPU) or CuPy arrays / torch CUDA tensors (NVIDIA); outputs come back as NumPy or CuPy arrays.
"""

from __future__ import annotations

import numpy as np

from .descriptor import check_attr_names, create_descriptor
from .devices import Handle, create_handle
from .dtypes import parse_dtype, to_numpy
from .lru import LRU
from .registry import get_spec, list_ops
from .status import Status, error
from .tensor import TensorDescriptor

#: How many descriptors (distinct operator, device, layouts and attributes) the sugar keeps;
#: the least recently used one is destroyed when another is needed.
CACHE_LIMIT = 256


def _destroy(key, desc) -> None:
    if not desc._destroyed:
        desc.destroy()


_handles: dict[str, Handle] = {}
_cache = LRU(CACHE_LIMIT, _destroy)


def _layout(x) -> tuple[str, TensorDescriptor]:
    mod = type(x).__module__
    if isinstance(x, np.ndarray):
        dev = "cpu"
    elif mod.startswith("cupy"):
        dev = f"nvidia:{x.device.id}"
    elif mod.startswith("torch"):
        dev = "cpu" if x.device.type == "cpu" else f"nvidia:{x.device.index or 0}"
        dtype = parse_dtype(x.dtype)
        return dev, TensorDescriptor(tuple(x.shape), tuple(x.stride()), dtype)
    else:
        raise error(Status.BAD_PARAM, f"ops: unsupported input type {type(x).__name__}")
    item = x.dtype.itemsize
    if any(s % item or s < 0 for s in x.strides):
        raise error(Status.BAD_TENSOR_STRIDES, "ops: strides must be non-negative multiples of the item size")
    return dev, TensorDescriptor(tuple(x.shape), tuple(s // item for s in x.strides), parse_dtype(x.dtype))


def _handle(dev: str) -> Handle:
    h = _handles.get(dev)
    if h is None:
        h = _handles[dev] = create_handle(dev)
    return h


def _alloc(dev: str, desc: TensorDescriptor):
    if dev == "cpu":
        return np.empty(desc.shape, dtype=to_numpy(desc.dtype))
    from .cuda import runtime

    cp = runtime.cupy()
    npd = to_numpy(desc.dtype)
    if npd.name == "bfloat16":
        npd = np.dtype(np.uint16)
    return cp.empty(desc.shape, dtype=npd)


def _frozen(value):
    """A list-valued attribute (kernel_size=[3, 3]) as a tuple, so that it can be part of a cache key."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(value.tolist())
    return value


def call(name: str, *inputs, out=None, **attrs):
    spec = get_spec(name)
    in_roles = [r.name for r in spec.inputs]
    if len(inputs) > len(in_roles):
        raise error(Status.BAD_PARAM, f"{name}: takes {len(in_roles)} inputs, got {len(inputs)}")
    layouts = [_layout(x) if x is not None else (None, None) for x in inputs]
    devs = {d for d, _ in layouts if d is not None}
    if len(devs) != 1:
        raise error(Status.BAD_PARAM, f"{name}: inputs must all be on one device, got {sorted(devs)}")
    dev = devs.pop()
    check_attr_names(spec, attrs)
    in_descs = dict(zip(in_roles, (d for _, d in layouts), strict=False))
    if out is None:
        if spec.infer is None:
            raise error(Status.BAD_PARAM, f"{name}: pass out= (this operator cannot infer its outputs)")
        out_descs = spec.infer(**in_descs, **attrs)
        out_descs = {n: TensorDescriptor(d.shape, tuple(_contig(d.shape)), d.dtype) for n, d in out_descs.items()}
        outs = {n: _alloc(dev, d) for n, d in out_descs.items()}
    else:
        outs = out if isinstance(out, dict) else {spec.outputs[0].name: out}
        out_descs = {n: _layout(v)[1] for n, v in outs.items()}
    key = (
        spec.name,
        dev,
        tuple(sorted(in_descs.items(), key=lambda kv: kv[0])),
        tuple(sorted(out_descs.items())),
        tuple(sorted((k, _frozen(v)) for k, v in attrs.items())),
    )
    try:
        desc = _cache.get(key)
    except TypeError:  # an attribute value that cannot be a cache key: create, use, destroy
        key, desc = None, None
    if desc is None or desc._destroyed:
        desc = create_descriptor(spec.name, _handle(dev), **out_descs, **in_descs, **attrs)
        if key is not None:
            _cache.put(key, desc)
    ws = None
    if desc.workspace_size:
        ws = _alloc(dev, TensorDescriptor((desc.workspace_size,), (1,), parse_dtype("u8")))
    bufs = {**outs, **dict(zip(in_roles, inputs, strict=False))}
    try:
        desc.calculate(ws, *(bufs.get(r.name) for r in spec.tensors))
    finally:
        if key is None:
            desc.destroy()
    values = [outs[r.name] for r in spec.outputs if r.name in outs]
    return values[0] if len(values) == 1 else tuple(values)


def _contig(shape):
    from .tensor import contiguous_strides

    return contiguous_strides(shape)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in list_ops():

        def fn(*inputs, out=None, **attrs):
            return call(name, *inputs, out=out, **attrs)

        fn.__name__ = name
        fn.__doc__ = get_spec(name).summary
        return fn
    raise AttributeError(f"no operator {name!r}")


def __dir__():
    return list_ops()
