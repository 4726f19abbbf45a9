"""Progress of a fit: one-off messages (where it runs, the warm start, retries) and per-round progress.

A :class:`Progress` writes to stderr when ``verbose`` > 0 — a bar redrawn in place on a terminal, one plain line per
round otherwise (logs, CI, captured output) — and always logs at INFO level to the ``rffor`` logger, so that a fit
run quietly can still be followed with ``logging``. The serial and the Dask executors report through the same
object; the fit (:func:`rffor.solvers.rff.fit_rff`) owns it.
"""

from __future__ import annotations

import logging
import math
import sys

__all__ = ["Progress", "RoundProgress", "format_seconds"]

logger = logging.getLogger("rffor")


class RoundProgress:
    """Per-round progress: round, loss, samples/s and elapsed time.

    A one-line bar redrawn in place on an interactive stream (a terminal), one plain line per round otherwise (logs,
    CI, notebooks' captured stderr). Every round is also logged at INFO level to the ``rffor`` logger.

    Parameters
    ----------
    n_rounds : int
        Planned rounds (or at most this many passes).
    stream : file-like, default sys.stderr
        None: log only.
    interactive : bool, optional
        Default ``stream.isatty()``.
    width : int, default 24
        Characters of the bar.
    unit : str, default "round"
        What is counted ("round" of DSGD, "pass" of MM).
    """

    def __init__(
        self, n_rounds: int, *, stream=sys.stderr, interactive: bool | None = None, width: int = 24, unit: str = "round"
    ):
        self.n_rounds = int(n_rounds)
        self.unit = unit
        self.stream = stream
        if interactive is None:
            isatty = getattr(stream, "isatty", None)
            interactive = bool(isatty()) if callable(isatty) else False
        self.interactive = interactive and stream is not None
        self.width = width
        self._open_line = False

    def line(self, record: dict, elapsed: float) -> str:
        """The text of one round's report."""
        r = int(record["round"]) + 1
        loss = record.get("loss", float("nan"))
        sps = record.get("samples_per_s", float("nan"))
        sps_text = f"{sps:,.0f} samples/s" if math.isfinite(sps) else "- samples/s"
        text = f"{self.unit} {r}/{self.n_rounds}  loss {loss:.5g}"
        if "evaluated" in record:  # an MM pass: the objective it evaluated, and whether the step was kept
            text += f"  objective {record['evaluated']:.7g}" + ("" if record.get("accepted", True) else " (rejected)")
        return f"{text}  {sps_text}  elapsed {format_seconds(elapsed)}"

    def update(self, record: dict, elapsed: float) -> None:
        """Report a completed round (a history record of :func:`rffor.solvers.rff.fit_rff`)."""
        text = self.line(record, elapsed)
        logger.info("%s", text)
        if self.stream is None:
            return
        if self.interactive:
            done = min(self.n_rounds, int(record["round"]) + 1)
            filled = int(round(self.width * done / max(1, self.n_rounds)))
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\r[rffor] [{bar}] {text}\x1b[K")
            self._open_line = True
            if done >= self.n_rounds:
                self.close()
        else:
            self.stream.write(f"[rffor] {text}\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """A one-off message (start, resume, retries), on its own line."""
        logger.info("%s", text)
        if self.stream is None:
            return
        self.close()
        self.stream.write(f"[rffor] {text}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line (interactive mode)."""
        if self._open_line and self.stream is not None:
            self.stream.write("\n")
            self.stream.flush()
        self._open_line = False


def format_seconds(s: float) -> str:
    """``12.3s``, ``4m05s`` or ``1h02m03s``."""
    if s < 60:
        return f"{s:.1f}s"
    m, s = divmod(int(round(s)), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m{s:02d}s"


class Progress:
    """Messages and round progress of one fit.

    Parameters
    ----------
    verbose : int, default 0
        > 0: write to ``stream``; 0: log only.
    stream : file-like, default sys.stderr
    """

    def __init__(self, verbose: int = 0, stream=None):
        self.verbose = int(verbose or 0)
        self.stream = (sys.stderr if stream is None else stream) if self.verbose else None
        self._rounds: RoundProgress | None = None

    def message(self, text: str) -> None:
        """A one-off line (start, warm start, resume, retries)."""
        if self._rounds is not None:
            self._rounds.message(text)
            return
        logger.info("%s", text)
        if self.stream is not None:
            self.stream.write(f"[rffor] {text}\n")
            self.stream.flush()

    def warning(self, text: str) -> None:
        """A line about something that went wrong and was handled (a lost worker): logged as a warning."""
        logger.warning("%s", text)
        if self.stream is not None:
            if self._rounds is not None:
                self._rounds.close()
            self.stream.write(f"[rffor] {text}\n")
            self.stream.flush()

    def start_rounds(self, n_rounds: int, unit: str = "round") -> None:
        """Announce that (at most) ``n_rounds`` rounds or passes follow (a bar or one line each)."""
        self._rounds = RoundProgress(n_rounds, stream=self.stream, unit=unit)

    def round_done(self, record: dict, elapsed: float) -> None:
        """Report a completed round (a history record of :func:`rffor.solvers.rff.fit_rff`)."""
        if self._rounds is not None:
            self._rounds.update(record, elapsed)

    def close(self) -> None:
        if self._rounds is not None:
            self._rounds.close()
