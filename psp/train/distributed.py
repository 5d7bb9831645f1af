"""Training over several processes of ``torch.distributed`` (ranks: usually one per node), as
clusters start them: ``torchrun`` or ``srun``.

Each rank trains with its own workers on its own copy of the table (:mod:`psp.train.parallel`)
and the ranks meet at every synchronisation point of the run, where :class:`UpdateMerge` adds up
what each rank changed since the last one. The backend is gloo on CPUs and nccl on CUDA.
"""

from __future__ import annotations

import datetime
import os
import subprocess
from dataclasses import dataclass

import torch
import torch.distributed as dist

#: First port tried for the rendezvous under SLURM (the job id picks one above it).
SLURM_PORT_BASE = 29500


@dataclass(frozen=True)
class World:
    """This process's place among the ranks of a run."""

    rank: int
    size: int
    local_rank: int
    address: str
    port: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def world_from_env(env: os._Environ | dict | None = None) -> World | None:
    """The ranks this process belongs to, from what ``torchrun`` or ``srun`` sets; ``None``
    for a run of one rank.

    ``torchrun`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
    ``MASTER_PORT``. ``srun`` sets ``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS``,
    ``SLURM_LOCALID`` and ``SLURM_STEP_NODELIST``: the first node of the step hosts the
    rendezvous, on a port derived from the job id unless ``MASTER_PORT`` is set. A batch script
    of a many-task allocation that was not started by ``srun`` is one rank.
    """
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        size = int(env["WORLD_SIZE"])
        if size <= 1:
            return None
        return World(
            rank=int(env["RANK"]),
            size=size,
            local_rank=int(env.get("LOCAL_RANK", 0)),
            address=env.get("MASTER_ADDR", "127.0.0.1"),
            port=int(env.get("MASTER_PORT", SLURM_PORT_BASE)),
        )
    size = int(env.get("SLURM_STEP_NUM_TASKS", 1))
    if size <= 1:
        return None
    port = int(env.get("MASTER_PORT", SLURM_PORT_BASE + int(env.get("SLURM_JOB_ID", 0)) % 20000))
    return World(
        rank=int(env["SLURM_PROCID"]),
        size=size,
        local_rank=int(env.get("SLURM_LOCALID", 0)),
        address=env.get("MASTER_ADDR") or first_host(env["SLURM_STEP_NODELIST"]),
        port=port,
    )


def first_host(nodelist: str) -> str:
    """The first host name of a SLURM node list (``node[03-05],gpu1`` -> ``node03``)."""
    out = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
    )
    return out.stdout.split()[0]


def start(world: World, device: torch.device, timeout_s: float = 1800) -> None:
    """Join the run's process group (gloo on CPUs, nccl on CUDA, which also picks the GPU)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    # env:// so that under torchrun the ranks join its agent's store instead of opening a new
    # one on its port; under srun the variables come from world_from_env.
    os.environ.update(MASTER_ADDR=world.address, MASTER_PORT=str(world.port))
    dist.init_process_group(
        backend,
        init_method="env://",
        rank=world.rank,
        world_size=world.size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def stop() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def broadcast_object(value, world: World | None):
    """Rank 0's ``value`` on every rank (``value`` itself in a run of one rank)."""
    if world is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_tensors(tensors: list[torch.Tensor], world: World | None) -> None:
    """Overwrite every rank's ``tensors`` with rank 0's, in place."""
    if world is not None:
        for tensor in tensors:
            dist.broadcast(tensor, src=0)


def gather_objects(value, world: World | None) -> list:
    """Every rank's ``value``, in rank order, on every rank (``[value]`` in a run of one)."""
    if world is None:
        return [value]
    out = [None] * world.size
    dist.all_gather_object(out, value)
    return out


class UpdateMerge:
    """Adds up the ranks' updates at each synchronisation point.

    Since the last one, every rank trained its own copy of the table on its own mega-batches.
    The merged table is the last merged one plus the sum of every rank's change, as if the
    ranks' updates had been applied to one table, the way a node's workers apply theirs. A
    moment is a running mean, not a sum: the merged one is the mean of the changed moments of
    the ranks that changed the row (a row one rank used keeps that rank's moment).
    """

    def __init__(self, table: torch.Tensor, moments: list[torch.Tensor]):
        self.table, self.moments = table, moments
        self.base = [t.clone() for t in (table, *moments)]

    def __call__(self) -> None:
        table_base, *moment_bases = self.base
        delta = self.table - table_base
        dist.all_reduce(delta)
        self.table.copy_(table_base + delta)
        for moment, base in zip(self.moments, moment_bases):
            change = moment - base
            users = change.ne(0).any(dim=1).to(change.dtype)
            dist.all_reduce(change)
            dist.all_reduce(users)
            moment.copy_(base + change / users.clamp(min=1).unsqueeze(1))
        for base, tensor in zip(self.base, (self.table, *self.moments)):
            base.copy_(tensor)
