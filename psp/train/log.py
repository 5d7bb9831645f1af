"""``train_log.tsv`` (one row every ``log_every`` steps and one per epoch) and the learning curve.

A row is a plain dict of strings; evaluation metrics add columns after :data:`LOG_COLUMNS`. An
epoch row also says where the epoch's time went: the seconds of each phase of
:class:`psp.train.step.PhaseTimes` (``data_s``, ``mine_s``, ``steps_s``, ``update_s``), summed
over the workers.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

from psp.io import atomic_open, atomic_path

LOG_COLUMNS = ["event", "step", "epoch", "loss", "pairs_per_s", "megabatch", "elapsed"]
PHASE_COLUMNS = ["data_s", "mine_s", "steps_s", "update_s"]


class TrainLog:
    """The log rows so far and the running loss of the steps since the last step row."""

    def __init__(self, rows: list[dict] | None = None):
        self.rows = rows or []
        self._reset(time.perf_counter())

    def _reset(self, now: float) -> None:
        self.loss, self.steps, self.pairs, self.t0 = 0.0, 0, 0, now

    def add_step(self, loss: float, pairs: int) -> None:
        self.loss += loss
        self.steps += 1
        self.pairs += pairs

    def step_row(
        self,
        step: int,
        epoch: int,
        megabatch: int,
        elapsed: float,
        pairs_per_s: float | None = None,
    ) -> tuple[float, float]:
        """Close the running window with a ``step`` row; returns its mean loss and pairs/s
        (``pairs_per_s`` when given: a parallel run logs its steps after they ran, so it
        passes the rate it measured over them)."""
        now = time.perf_counter()
        loss = self.loss / max(1, self.steps)
        rate = pairs_per_s if pairs_per_s is not None else self.pairs / max(1e-9, now - self.t0)
        self.append(
            "step",
            step=step,
            epoch=epoch,
            loss=loss,
            pairs_per_s=rate,
            megabatch=megabatch,
            elapsed=elapsed,
        )
        self._reset(now)
        return loss, rate

    def append(
        self,
        event: str,
        *,
        step: int,
        epoch: int,
        loss: float,
        pairs_per_s: float,
        megabatch: int,
        elapsed: float,
        metrics: dict[str, float] | None = None,
        phases: dict[str, float] | None = None,
    ) -> None:
        row = {
            "event": event,
            "step": step,
            "epoch": epoch,
            "loss": f"{loss:.5f}",
            "pairs_per_s": f"{pairs_per_s:.1f}",
            "megabatch": megabatch,
            "elapsed": f"{elapsed:.1f}",
        }
        row.update({f"{k}_s": f"{v:.2f}" for k, v in (phases or {}).items()})
        row.update({k: f"{v:.5f}" for k, v in (metrics or {}).items()})
        self.rows.append(row)

    def write(self, path: Path) -> None:
        extra = sorted({k for row in self.rows for k in row} - set(LOG_COLUMNS + PHASE_COLUMNS))
        with atomic_open(path, "wt") as fh:
            columns = LOG_COLUMNS + PHASE_COLUMNS + extra
            writer = csv.DictWriter(fh, columns, delimiter="\t", lineterminator="\n")
            writer.writeheader()
            writer.writerows(self.rows)

    @classmethod
    def read(cls, path: Path, up_to_step: int) -> TrainLog:
        """The rows of a log written by :meth:`write` up to ``up_to_step`` (none if absent)."""
        if not path.exists():
            return cls()
        with open(path, encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        return cls(
            [
                {k: v for k, v in row.items() if v != ""}
                for row in rows
                if int(row["step"]) <= up_to_step
            ]
        )


def plot_learning_curve(rows: list[dict], out_png: Path, metric: str | None = None) -> None:
    """Training loss against step, and an evaluation metric per epoch when there is one
    (``metric``, else the first evaluation column of the log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fixed = set(LOG_COLUMNS + PHASE_COLUMNS)
    metric = metric or next((k for r in rows for k in r if k not in fixed), None)
    steps = [int(r["step"]) for r in rows if r["event"] == "step"]
    loss = [float(r["loss"]) for r in rows if r["event"] == "step"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, loss, color="tab:blue", label="train loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    evals = [r for r in rows if r["event"] == "epoch" and metric and metric in r]
    if evals:
        ax2 = ax.twinx()
        ax2.plot(
            [int(r["step"]) for r in evals],
            [float(r[metric]) for r in evals],
            "o-",
            color="tab:orange",
            label=metric,
        )
        ax2.set_ylabel(metric)
    ax.set_title("P-SP training")
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
