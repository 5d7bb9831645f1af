"""Progress bars for the code paths whose start-up counts (``psp embed``, ``psp score``,
``TableModel.embed``): tqdm's bar where it would show, else a stand-in that imports nothing.

``tqdm.auto`` with ``disable=None`` shows a bar on a terminal and in a notebook (a widget),
and none where stderr is neither (a cluster job's log, a pipe). There, importing tqdm and its
notebook check would cost 60-90 ms for nothing, a share of a ``psp embed`` of 100,000 lines.
Long jobs (training, mining) use tqdm directly.
"""

from __future__ import annotations

import sys

__all__ = ["progress"]


class _NoBar:
    """What a disabled bar does: count nothing, draw nothing."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None


def bar_would_show(disable: bool | None) -> bool:
    """Whether ``tqdm.auto.tqdm(disable=disable)`` draws a bar: not when ``disable`` is true;
    for ``None``, on a terminal's stderr or in a notebook (whose kernel is imported)."""
    if disable is None:
        return sys.stderr.isatty() or "ipykernel" in sys.modules
    return not disable


def progress(*, disable: bool | None = None, **kwargs):
    """``tqdm.auto.tqdm(disable=disable, **kwargs)``, or :class:`_NoBar` where that bar would
    not show (:func:`bar_would_show`)."""
    if not bar_would_show(disable):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(disable=disable, **kwargs)
