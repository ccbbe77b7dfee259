"""Real PyTorch on the CPU under `pytest --memguard` (tests/pytest/test_pytest_plugin.py): no CUDA is
used, so every marker holds (there is no CUDA memory to limit) and the plugin must stay harmless:
tensors, autograd, a reference cycle holding a tensor, torch.compile."""
import pytest
import torch

kept = []


@pytest.mark.limit_gpu_memory("1 KiB")
def test_matmul_and_backward():
    w = torch.randn(256, 256, requires_grad=True)
    loss = (w @ torch.randn(256, 256)).sum()
    loss.backward()
    assert w.grad is not None


@pytest.mark.limit_gpu_leaks("1 KiB")
def test_keeps_a_cpu_tensor():
    kept.append(torch.ones(1 << 20))


@pytest.mark.no_tensor_cycles
def test_cpu_tensor_in_a_cycle():
    class Node:
        pass
    n = Node()
    n.t = torch.zeros(1 << 20)
    n.self = n


@pytest.mark.limit_gpu_memory("1 KiB")
@pytest.mark.no_tensor_cycles
def test_compiled():
    f = torch.compile(lambda x: torch.sin(x) + 1, backend="eager")
    assert torch.allclose(f(torch.zeros(4)), torch.ones(4))
