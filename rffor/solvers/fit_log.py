"""The driver's record of a random-feature fit: history, a checkpoint after every completed round or pass, progress.

A route (:mod:`rffor.solvers.routes`) reports each completed round or pass to a :class:`FitLog` with its state as
plain arrays; the log appends the record to the history, writes the checkpoint atomically (:mod:`rffor.checkpoint`)
and reports progress (:mod:`rffor.progress`). When the Dask scheduler is lost, :meth:`FitLog.lost_scheduler` says
which round the checkpoint holds and how to resume.
"""

from __future__ import annotations

import time

import numpy as np

from .. import checkpoint as ckpt_io
from ..executor import SchedulerLostError
from ..progress import Progress

__all__ = ["FitLog"]


class FitLog:
    """History, checkpoints and progress of one fit.

    Parameters
    ----------
    checkpoint : str, os.PathLike or None
        Where to write the checkpoint after every completed round or pass (None: nowhere).
    info : dict
        What the checkpoint records about the fit (random state, partitions, fingerprint; the selected λ, κ/ε, γ_Θ
        are added by the fit).
    progress : Progress
    history : list of dict
        The records so far (a resumed fit's, from its checkpoint).
    unit : str, default "round"
        What the route counts: "round" (DSGD) or "pass" (MM, closed form).
    """

    def __init__(self, checkpoint, info: dict, progress: Progress, history: list[dict] | None = None, unit="round"):
        self.checkpoint, self.info, self.progress = checkpoint, info, progress
        self.history: list[dict] = [] if history is None else history
        self.unit = unit
        self.done = -1
        self.total = 0
        self.tic = time.perf_counter()

    def message(self, text: str) -> None:
        """A one-off progress message."""
        self.progress.message(text)

    def start(self, total: int, first: int) -> None:
        """A route starts: at most ``total`` rounds or passes, the first one numbered ``first``."""
        self.total, self.done = total, first - 1
        self.progress.start_rounds(total, unit=self.unit)

    def record(self, record: dict) -> None:
        """A record that is not a completed round (the closed form's)."""
        self.history.append(record)

    def completed(self, r: int, state: dict[str, np.ndarray], record: dict) -> None:
        """Round or pass ``r`` completed with the route's ``state`` (plain arrays, what a resume restores)."""
        self.history.append(record)
        if self.checkpoint is not None:
            ckpt_io.save(self.checkpoint, state, r, self.history, self.info)
        self.done = r
        self.progress.round_done(record, time.perf_counter() - self.tic)

    def lost_scheduler(self, exc: BaseException) -> SchedulerLostError:
        """The error to raise when the scheduler was lost: what the checkpoint holds and how to resume."""
        unit = self.unit
        if self.checkpoint is None:
            held = "no checkpoint was written: pass checkpoint= to be able to resume"
        elif self.done >= 0:
            held = (
                f"the checkpoint {str(self.checkpoint)!r} holds {unit} {self.done + 1}/{self.total}: restart the "
                "scheduler and its workers, then fit again with resume=True (command line: the same command with "
                "--resume)"
            )
        else:
            held = f"no {unit} was completed, the checkpoint {str(self.checkpoint)!r} was not written"
        where = f"in {unit} {self.done + 2}/{self.total}" if self.total else "before the first " + unit
        return SchedulerLostError(f"{exc}. The fit stopped {where}; {held}")
