from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def rt(random_val, topp, topk, temperature):
    return {"random_val": random_val, "topp": topp, "topk": topk, "temperature": temperature}


def ties(rng, name, dtype, shape):
    """Few distinct values: many exact ties (ranked by index)."""
    return rng.integers(-3, 3, size=shape).astype("float64")


def spread(scale):
    def data(rng, name, dtype, shape):
        return rng.uniform(-2.0, 2.0, size=shape) * scale

    return data


def case(n, runtime, desc, out=DType.I64, data=None, suites=("quick",)):
    return Case({"result": T((), None, out), "probs": T((n,))}, DT, desc, runtime=runtime, data=data, suites=suites)


CASES = [
    case(13, rt(0.0, 0.9, 5, 1.0), "greedy: random_val 0"),
    case(13, rt(0.5, 0.9, 1, 1.0), "greedy: topk 1"),
    case(100, rt(0.5, 0.0, 10, 1.0), "greedy: topp 0", DType.I32),
    case(100, rt(0.5, 0.9, 10, 0.0), "greedy: temperature 0", DType.U32),
    case(257, rt(0.0, 0.9, 10, 1.0), "greedy with ties (lowest index)", DType.I16, data=ties),
    case(1, rt(0.5, 0.9, 10, 1.0), "one entry"),
    case(2, rt(0.7, 1.0, 2, 1.0), "two entries", DType.I8),
    case(31, rt(0.9, 0.8, 20, 0.5), "shorter than a warp", DType.U8),
    case(1000, rt(0.5, 0.9, 50, 1.0), "1000, topk 50, topp 0.9"),
    case(1000, rt(0.99, 1.0, 1000, 0.7), "1000, topk = n, topp 1, T 0.7", DType.U64),
    case(4097, rt(0.3, 0.8, 5000, 1.3), "4097, topk > n", DType.I32),
    case(4097, rt(0.95, 0.999, 4097, 4.0), "4097, deep into the tail (T 4)"),
    case(513, rt(0.7, 0.95, 100, 1.0), "ties ranked by index", DType.U16, data=ties),
    case(513, rt(0.6, 1.0, 513, 1.0), "ties, topk = n", data=ties),
    case(64, rt(0.999, 0.5, 64, 2.0), "topp 0.5 limits, random_val near 1"),
    case(300, rt(0.9, 0.9, 300, 0.1), "large logits / small T (weights underflow)", data=spread(50.0)),
    case(300, rt(1.5, 0.9, 7, 1.0), "random_val > 1 clamps to the top-k'"),
    case(20011, rt(0.6, 0.9, 3000, 1.0), "several blocks, ties (large equal-value buckets)", DType.I32, data=ties),
    case(50000, rt(0.9, 1.0, 50000, 0.8), "several blocks, topk = n", data=spread(4.0)),
    case(50000, rt(0.3, 0.95, 40, 0.7), "several blocks, topk 40", data=spread(4.0)),
    case(50001, rt(0.0, 0.9, 50, 0.8), "greedy in one block, ties, odd tail", DType.I32, data=ties),
    case(300007, rt(0.0, 0.9, 50, 0.8), "greedy over 2^18 entries (two launches), ties", data=ties),
    case(32000, rt(0.8, 0.9, 50, 0.8), "vocabulary 32000", suites=("full",)),
    case(151936, rt(0.8, 0.9, 50, 0.8), "vocabulary 151936", suites=("full",)),
    case(151936, rt(0.95, 1.0, 151936, 1.0), "vocabulary 151936, topk = n", suites=("full",)),
    case(151936, rt(0.0, 0.9, 50, 0.8), "vocabulary 151936, greedy", suites=("full",)),
]
