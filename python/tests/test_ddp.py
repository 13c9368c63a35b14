"""einjit layers inside DistributedDataParallel: two processes over the gloo backend on
loopback give the same gradients as one process over the whole batch."""
import os
import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import einjit.torch  # noqa: E402

BATCH = 16


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = einjit.torch.layer("t[b,o] := x[b,i] * w[o,i]\ny[b,o] := tanh(t[b,o] + c[o])")
        self.out = einjit.torch.layer("y[b] := h[b,o] * v[o]")
        g = torch.Generator().manual_seed(11)
        self.w = torch.nn.Parameter(torch.randn(12, 6, generator=g, dtype=torch.float64))
        self.c = torch.nn.Parameter(torch.randn(12, generator=g, dtype=torch.float64))
        self.v = torch.nn.Parameter(torch.randn(12, generator=g, dtype=torch.float64))

    def forward(self, x):
        return self.out(self.hidden(x, self.w, self.c), self.v)


def data():
    g = torch.Generator().manual_seed(12)
    return torch.randn(BATCH, 6, generator=g, dtype=torch.float64), torch.randn(BATCH, generator=g, dtype=torch.float64)


def worker(rank, world, port, out):
    torch.set_num_threads(1)  # two processes on the machine's cores
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        model = torch.nn.parallel.DistributedDataParallel(Model())
        x, y = data()
        part = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
        ((model(x[part]) - y[part]) ** 2).mean().backward()
        if rank == 0:
            torch.save([p.grad for p in model.module.parameters()], out)
    finally:
        dist.destroy_process_group()


def test_ddp_two_processes_match_one(tmp_path):
    model = Model()
    x, y = data()
    ((model(x) - y) ** 2).mean().backward()
    expected = [p.grad for p in model.parameters()]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "grads.pt")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(2, port, out), nprocs=2, join=True)
    got = torch.load(out)
    assert len(got) == len(expected) == 3
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
