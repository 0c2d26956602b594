"""The CPU thread pool (infiniop_py/cpu/pool.py): every part runs exactly once, whoever takes it;
the first error propagates once every part that started has finished; parts never split again;
the same thread runs the same block of parts from call to call when nothing is late."""

import threading
import time

import numpy as np
import pytest

from infiniop_py.cpu import pool

pytestmark = pytest.mark.skipif(pool.THREADS < 2, reason="one CPU: the pool runs everything inline")


def _release_gil(seconds: float) -> None:
    time.sleep(seconds)  # as a compiled kernel or a NumPy loop does


@pytest.mark.parametrize("n", [2, 3, 8, 64])
def test_every_part_runs_once(n):
    counts = np.zeros(n, np.int64)
    lock = threading.Lock()

    def part(i):
        _release_gil(1e-4)
        with lock:
            counts[i] += 1

    for _ in range(5):
        pool.run_all(part, [(i,) for i in range(n)])
    assert np.all(counts == 5)


def test_first_error_propagates_after_the_running_parts_finish():
    finished = []

    def part(i):
        _release_gil(2e-3 if i != 1 else 0)
        if i == 1:
            raise ValueError("part 1")
        finished.append(i)

    with pytest.raises(ValueError, match="part 1"):
        pool.run_all(part, [(i,) for i in range(8)])
    snapshot = list(finished)
    time.sleep(0.05)
    assert finished == snapshot  # nothing still running behind the caller's back
    pool.run_all(lambda i: None, [(i,) for i in range(4)])  # the pool still works


def test_parts_do_not_split_again():
    seen = []

    def inner(i):
        seen.append(threading.current_thread().name)

    def outer(i):
        _release_gil(1e-4)
        assert not pool.parallel()
        pool.run_all(inner, [(j,) for j in range(4)])

    pool.run_all(outer, [(i,) for i in range(4)])
    assert len(seen) == 16
    assert pool.parallel()  # the caller's flag is restored


def test_threads_keep_their_blocks():
    """With parts long enough for every helper to start, thread t runs block t (the caller
    block 0): the same data stays with the same thread from call to call."""
    n = 2 * pool.THREADS
    owners = [None] * n

    def part(i):
        owners[i] = threading.current_thread().name
        _release_gil(0.02)

    def kept():
        me = threading.current_thread().name
        blocks = [(owners[2 * t], owners[2 * t + 1]) for t in range(pool.THREADS)]
        return blocks[0] == (me, me) and all(a == b for a, b in blocks) and len(set(owners)) == pool.THREADS

    for _ in range(5):  # a loaded machine may start a helper late (its block then goes to others)
        pool.run_all(part, [(i,) for i in range(n)])
        if kept():
            break
    assert kept(), owners
