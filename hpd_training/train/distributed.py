"""Data-parallel training by hand, under `torchrun --nproc_per_node=N`: each rank trains a full
replica on its own pages, and the replicas stay identical because they start from rank 0's
weights and every step applies the same averaged gradients with the same lr. (Not
DistributedDataParallel: the training step does not go through `model.forward`.) In a plain
run (no torchrun: rank 0 of a world of 1) the collectives here do nothing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

import torch
import torch.distributed as dist


def init(cuda: bool) -> tuple[int, int, str]:
    """(rank, world, device): under torchrun (WORLD_SIZE set), join the process group (NCCL on
    GPUs, gloo on CPU) with one GPU per rank, `cuda:LOCAL_RANK`; else rank 0 of 1 on "cuda" or
    "cpu", as a plain run always was."""
    device = "cuda" if cuda else "cpu"
    if "WORLD_SIZE" not in os.environ:
        return 0, 1, device
    if cuda:
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", device_id=torch.device(device) if cuda else None)
    return dist.get_rank(), dist.get_world_size(), device


def broadcast_parameters(params: Iterable[torch.Tensor], world: int) -> None:
    """Overwrite every replica's `params` with rank 0's, so that replicas start identical even
    from a fresh random init."""
    if world > 1:
        for p in params:
            dist.broadcast(p.data, src=0)


def average_gradients(params: list[torch.Tensor], world: int) -> None:
    """Replace each param's grad by its mean over the ranks, in one all_reduce of a flat buffer.
    A param without a grad on this rank (unused by its batch) counts as zeros and gets the mean
    back, so that every rank steps the same params."""
    if world == 1:
        return
    flat = torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat /= world
    for p, grad in zip(params, flat.split([p.numel() for p in params])):
        p.grad = grad.view_as(p)  # views of `flat`: the optimizer reads them, zero_grad drops them


def max_over_ranks(value: float, world: int, device: str) -> float:
    """The largest `value` of all ranks. Used for the elapsed time, so that all ranks share one
    clock: the same stop step (a rank that stopped alone would hang the others in all_reduce)
    and the same lr."""
    if world == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def digest(params: Iterable[torch.Tensor]) -> str:
    """SHA-256 of the params' bytes: equal exactly when the weights are."""
    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().cpu().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def replicas_agree(params: list[torch.Tensor], world: int) -> bool:
    """Whether every rank holds bit-identical `params` (the same on every rank: a collective)."""
    if world == 1:
        return True
    digests = [None] * world
    dist.all_gather_object(digests, digest(params))
    return len(set(digests)) == 1


def barrier(world: int) -> None:
    """Wait for every rank (the others, while rank 0 evaluates and saves)."""
    if world > 1:
        dist.barrier()


def finish(world: int) -> None:
    """Leave the process group (before the training's os._exit)."""
    if world > 1:
        dist.destroy_process_group()
