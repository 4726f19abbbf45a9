"""Tests of rffor.progress: the per-round lines and bar, one-off messages and warnings, the ``rffor`` logger.

What a fit reports through it (which messages, when) is tested with the fits (tests/test_estimator.py, the executor
tests).
"""

from __future__ import annotations

import io
import logging

import pytest

from rffor.progress import Progress, RoundProgress, format_seconds

REC = {"round": 0, "loss": 0.125, "samples_per_s": 12345.6}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_and_bar():
    out = io.StringIO()
    p = RoundProgress(3, stream=out, interactive=False)
    p.update(REC, 1.5)
    p.update({**REC, "round": 1}, 75.0)
    lines = out.getvalue().splitlines()
    assert lines == [
        "[rffor] round 1/3  loss 0.125  12,346 samples/s  elapsed 1.5s",
        "[rffor] round 2/3  loss 0.125  12,346 samples/s  elapsed 1m15s",
    ]
    out = io.StringIO()
    p = RoundProgress(2, stream=out, interactive=True, width=4)
    p.update(REC, 1.0)
    p.update({**REC, "round": 1}, 2.0)
    text = out.getvalue()
    assert text.startswith("\r[rffor] [##..] round 1/2") and "\r[rffor] [####] round 2/2" in text
    assert text.endswith("\n") and text.count("\n") == 1


def test_interactive_is_the_streams_isatty():
    assert RoundProgress(2, stream=_Terminal()).interactive
    assert not RoundProgress(2, stream=io.StringIO()).interactive
    assert not RoundProgress(2, stream=None, interactive=True).interactive  # nothing to draw on


def test_an_mm_pass_says_its_objective_and_whether_it_was_kept():
    p = RoundProgress(4, stream=None, unit="pass")
    kept = p.line({**REC, "evaluated": 0.123456789, "accepted": True}, 3.0)
    assert kept == "pass 1/4  loss 0.125  objective 0.1234568  12,346 samples/s  elapsed 3.0s"
    rejected = p.line({**REC, "round": 1, "evaluated": 0.5, "accepted": False}, 3.0)
    assert "pass 2/4" in rejected and "objective 0.5 (rejected)" in rejected
    unknown = p.line({"round": 0}, 0.0)  # no loss or speed measured yet
    assert unknown == "pass 1/4  loss nan  - samples/s  elapsed 0.0s"


def test_a_message_during_rounds_ends_the_bar_line_first():
    out = _Terminal()
    p = Progress(verbose=1, stream=out)
    p.start_rounds(3)
    p.round_done(REC, 1.0)
    p.message("retrying round 2")
    p.round_done({**REC, "round": 1}, 2.0)
    p.warning("worker lost")
    p.close()
    text = out.getvalue()
    assert "[rffor] [########................] round 1/3" in text
    assert "round 1/3  loss 0.125  12,346 samples/s  elapsed 1.0s\x1b[K\n[rffor] retrying round 2\n" in text
    assert "round 2/3  loss 0.125  12,346 samples/s  elapsed 2.0s\x1b[K\n[rffor] worker lost\n" in text
    assert text.endswith("worker lost\n")  # close() after a closed line adds nothing


def test_verbose_zero_writes_nothing_and_logs_everything(caplog, capsys):
    p = Progress(verbose=0)
    assert p.stream is None
    with caplog.at_level(logging.INFO, logger="rffor"):
        p.message("start")
        p.start_rounds(2, unit="pass")
        p.round_done(REC, 0.5)
        p.message("between passes")
        p.warning("lost a worker")
        p.close()
    assert capsys.readouterr() == ("", "")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "start"),
        (logging.INFO, "pass 1/2  loss 0.125  12,346 samples/s  elapsed 0.5s"),
        (logging.INFO, "between passes"),
        (logging.WARNING, "lost a worker"),
    ]


def test_verbose_writes_to_stderr_by_default(capsys):
    p = Progress(verbose=2)
    p.message("fitting on 1 partition")
    p.round_done(REC, 1.0)  # before start_rounds: nothing to report on
    p.start_rounds(1)
    p.round_done(REC, 1.0)
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "[rffor] fitting on 1 partition",
        "[rffor] round 1/1  loss 0.125  12,346 samples/s  elapsed 1.0s",
    ]


@pytest.mark.parametrize(
    "seconds, text",
    [(0.0, "0.0s"), (12.34, "12.3s"), (59.94, "59.9s"), (60.0, "1m00s"), (245.0, "4m05s"), (3723.0, "1h02m03s")],
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text
