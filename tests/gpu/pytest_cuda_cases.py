"""GPU acceptance of the pytest plugin: one passing and one failing test per marker, on real CUDA
tensors. Not run by CTest (no GPU there); on the GPU machine, with the wheel installed:

    pytest --memguard -p no:cacheprovider tests/gpu/pytest_cuda_cases.py -v
    MEMGUARD_ALLOCATOR=memguard pytest --memguard -p no:cacheprovider tests/gpu/pytest_cuda_cases.py -v

Expected in both modes: every *_passes test passes, every *_fails test fails with a memguard message
(exit status 1), the failures of limit_gpu_memory and limit_gpu_leaks name this file's lines as
allocation sites, and the summary lists test_unmarked_largest_passes first (512.00 MiB). In
allocator mode the no_tensor_cycles failure names its site too; with PyTorch's allocator it says
that the memory stayed in PyTorch's cache (memguard sees segments there).
"""
import pytest
import torch

MiB = 1 << 20
kept = []


def cuda_bytes(n):
    return torch.empty(n, dtype=torch.uint8, device="cuda")


@pytest.fixture(scope="module", autouse=True)
def cuda_initialized():
    cuda_bytes(1)  # CUDA initialized before the first test: its figures are PyTorch's counters
    yield


@pytest.mark.limit_gpu_memory("64 MiB")
def test_memory_passes():
    x = cuda_bytes(16 * MiB)
    del x


@pytest.mark.limit_gpu_memory("64 MiB")
def test_memory_fails():
    x = cuda_bytes(256 * MiB)
    del x


@pytest.mark.limit_gpu_leaks("16 MiB")
def test_leaks_passes():
    kept.append(cuda_bytes(1 * MiB))


@pytest.mark.limit_gpu_leaks("16 MiB")
def test_leaks_fails():
    kept.append(cuda_bytes(128 * MiB))


@pytest.mark.no_tensor_cycles
def test_cycles_passes():
    x = cuda_bytes(32 * MiB)
    del x


@pytest.mark.no_tensor_cycles
def test_cycles_fails():
    class Node:
        pass
    n = Node()
    n.t = cuda_bytes(32 * MiB)
    n.self = n


def test_unmarked_largest_passes():
    x = cuda_bytes(512 * MiB)
    del x
