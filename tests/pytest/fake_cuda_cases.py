"""The tests that tests/pytest/test_pytest_plugin.py runs under `pytest --memguard`: each allocates
CUDA memory through the fake CUDA runtime (MGTEST_FAKE_CUDART), and each memguard marker has a test
that keeps to its limit and one that breaks it. Their names say which: *_passes or *_fails (the
driver checks the outcomes against the names). Without --memguard every test passes."""
import ctypes
import os

import pytest

KiB, MiB = 1 << 10, 1 << 20


class _Runtime:
    """cudaMalloc and cudaFree: libmemguard.so's when it is preloaded (they come first in the global
    scope), else the fake runtime's own."""

    def __init__(self):
        fake = ctypes.CDLL(os.environ["MGTEST_FAKE_CUDART"])  # RTLD_LOCAL, as PyTorch loads it
        glob = ctypes.CDLL(None)
        self.malloc = getattr(glob, "cudaMalloc", None) or fake.cudaMalloc
        self.free = getattr(glob, "cudaFree", None) or fake.cudaFree
        self.malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        self.free.argtypes = [ctypes.c_void_p]


_rt = None


class Block:
    """CUDA memory, freed when the object goes away."""

    def __init__(self, size):
        global _rt
        self.rt = _rt = _rt or _Runtime()  # kept: at exit the module's globals may be gone first
        self.ptr = ctypes.c_void_p()
        rc = self.rt.malloc(ctypes.byref(self.ptr), size)
        assert rc == 0, f"cudaMalloc({size}) returned {rc}"

    def __del__(self):
        self.rt.free(self.ptr)


kept = []  # what the leaking tests leave behind


def big_allocation(size):
    return Block(size)


def leaky_allocation(size):
    kept.append(Block(size))


def cyclic_allocation(size):
    class Node:
        pass
    node = Node()
    node.block = Block(size)
    node.self = node  # a reference cycle: only the garbage collector frees the block


@pytest.fixture(scope="module")
def resident():
    """8 MiB live across the tests that use it: not part of their incremental peak."""
    return Block(8 * MiB)


@pytest.mark.limit_gpu_memory("4 MiB")
def test_memory_passes():
    a = Block(2 * MiB)
    del a


@pytest.mark.limit_gpu_memory("4 MiB")
def test_memory_fails():
    a = big_allocation(3 * MiB)
    b = big_allocation(3 * MiB)
    del a, b


@pytest.mark.limit_gpu_memory("2 MiB")
def test_memory_is_incremental_passes(resident):
    a = Block(1 * MiB)
    del a


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_leaks_passes():
    leaky_allocation(512 * KiB)


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_leaks_fails():
    leaky_allocation(4 * MiB)


@pytest.mark.limit_gpu_leaks(limit="1 MiB")
def test_leaks_after_collection_passes():
    cyclic_allocation(8 * MiB)  # garbage, collected before the leak is measured


@pytest.mark.no_tensor_cycles
def test_cycles_passes():
    a = Block(2 * MiB)
    del a


@pytest.mark.no_tensor_cycles
def test_cycles_fails():
    cyclic_allocation(2 * MiB)


def test_unmarked_largest_passes():
    a = Block(16 * MiB)
    del a
