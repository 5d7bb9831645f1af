"""Adam for an embedding table whose minibatch gradient lives on a few thousand rows.

A P-SP minibatch of 128 pairs touches a few thousand rows of a 50k x 1024 table. Dense Adam
(``torch.optim.Adam``) still reads and writes all 51M parameters and both moment tensors on
every step; that memory traffic, not the model, is what made the original trainer slow.

:class:`LazyAdam` updates only the rows that received a gradient, with the semantics of
``torch.optim.SparseAdam``: the moments of a row move only when the row is used, and the bias
correction uses the global step count. This differs from dense Adam on rows without gradient:
dense Adam keeps moving such rows with their decaying first moment, lazy Adam leaves them alone.
Both optimizers take the gradient as ``(rows, values)``, coalesced (unique rows), so the trainer
code is the same for both and gradient clipping sees exactly the same norm.
"""

from __future__ import annotations

import torch


def fused_adam_rows_(
    adam: LazyAdam,
    rows: torch.Tensor,
    grad: torch.Tensor,
    *,
    grad_scale: float | torch.Tensor = 1.0,
) -> None:
    """:func:`psp.train.kernels.adam_rows_` with torch ops, for any device: the rows and their
    moments gathered, one pass of ``torch._fused_adam_`` (the kernel behind
    ``torch.optim.Adam(fused=True)``) over the copies, and the copies written back."""
    full = (adam.weight, adam.exp_avg, adam.exp_avg_sq)
    parts = [t.index_select(0, rows) for t in full]
    torch._fused_adam_(
        [parts[0]],
        [grad * grad_scale],
        [parts[1]],
        [parts[2]],
        [],
        [torch.tensor(float(adam.steps), device=adam.weight.device)],
        lr=adam.lr,
        beta1=adam.betas[0],
        beta2=adam.betas[1],
        weight_decay=0.0,
        eps=adam.eps,
        amsgrad=False,
        maximize=False,
    )
    for tensor, part in zip(full, parts):
        tensor.index_copy_(0, rows, part)


class LazyAdam:
    """Row-sparse ("lazy") Adam over a 2-D parameter, ``torch.optim.SparseAdam`` semantics.

    Args:
        weight: the table, updated in place (no autograd involved).
        lr, betas, eps: as in Adam.
        moments: existing first and second moments to update (a worker's view of shared
            ones); zeros by default.

    Example:
        >>> w = torch.zeros(10, 4)
        >>> opt = LazyAdam(w, lr=0.1)
        >>> opt.step(torch.tensor([2, 5]), torch.ones(2, 4))
        >>> bool(w[0].eq(0).all()), round(float(w[2, 0]), 4)
        (True, -0.1)
    """

    def __init__(
        self,
        weight: torch.Tensor,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        moments: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        self.weight = weight
        self.lr, self.betas, self.eps = lr, betas, eps
        if moments is None:
            moments = torch.zeros_like(weight), torch.zeros_like(weight)
        self.exp_avg, self.exp_avg_sq = moments
        self.steps = 0

    def share_memory_(self) -> LazyAdam:
        """Move the table and both moments to shared memory, so that worker processes update
        them in place (:mod:`psp.train.parallel`)."""
        for tensor in (self.weight, self.exp_avg, self.exp_avg_sq):
            tensor.share_memory_()
        return self

    @torch.no_grad()
    def step(
        self,
        rows: torch.Tensor,
        grad: torch.Tensor,
        *,
        grad_scale: float | torch.Tensor = 1.0,
        step: int | None = None,
    ) -> None:
        """Apply one update; ``rows`` must be unique, ``grad`` is ``(len(rows), dim)``, taken
        times ``grad_scale`` (a number, or a one-element tensor on the table's device). ``step`` is the update's number for the bias correction
        (default: this optimizer's count of updates, plus one); parallel workers pass the step
        the update has in the run's schedule.

        On the CPU the update is one pass over the rows where they live
        (:func:`psp.train.kernels.adam_rows_`), elsewhere :func:`fused_adam_rows_`.
        """
        self.steps = self.steps + 1 if step is None else step
        if self.weight.device.type == "cpu":
            from psp.train.kernels import adam_rows_ as update
        else:
            update = fused_adam_rows_
        update(self, rows, grad, grad_scale=grad_scale)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {
            "exp_avg": self.exp_avg,
            "exp_avg_sq": self.exp_avg_sq,
            "steps": torch.tensor([self.steps], dtype=torch.int64),
        }

    def load_state_tensors(self, state: dict[str, torch.Tensor]) -> None:
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
        self.steps = int(state["steps"][0])


class DenseAdam:
    """``torch.optim.Adam`` behind the same ``step(rows, grad)`` interface: the dense baseline.

    The row gradient is scattered into a full-size gradient, so every row's moments and value
    move on every step, exactly as in a trainer that uses a dense ``nn.Embedding``.
    """

    def __init__(
        self,
        weight: torch.Tensor,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        self.param = (
            weight if isinstance(weight, torch.nn.Parameter) else torch.nn.Parameter(weight)
        )
        self.opt = torch.optim.Adam([self.param], lr=lr, betas=betas, eps=eps)
        self.steps = 0

    @torch.no_grad()
    def step(
        self,
        rows: torch.Tensor,
        grad: torch.Tensor,
        *,
        grad_scale: float | torch.Tensor = 1.0,
        step: int | None = None,
    ) -> None:
        """As :meth:`LazyAdam.step` (``step`` is torch's own count here: the dense baseline
        runs in one process)."""
        full = torch.zeros_like(self.param)
        full.index_copy_(0, rows, grad * grad_scale)
        self.param.grad = full
        self.opt.step()
        self.param.grad = None
        self.steps += 1

    def _state(self) -> dict:
        if not self.opt.state:  # materialize empty moments so that save/load always round-trip
            zeros = torch.zeros_like(self.param)
            self.opt.state[self.param] = {
                "step": torch.tensor(0.0),
                "exp_avg": zeros,
                "exp_avg_sq": zeros.clone(),
            }
        return self.opt.state[self.param]

    def state_tensors(self) -> dict[str, torch.Tensor]:
        state = self._state()
        return {
            "exp_avg": state["exp_avg"],
            "exp_avg_sq": state["exp_avg_sq"],
            "steps": torch.tensor([self.steps], dtype=torch.int64),
        }

    def load_state_tensors(self, state: dict[str, torch.Tensor]) -> None:
        own = self._state()
        own["exp_avg"].copy_(state["exp_avg"])
        own["exp_avg_sq"].copy_(state["exp_avg_sq"])
        self.steps = int(state["steps"][0])
        own["step"] = torch.tensor(float(self.steps))
