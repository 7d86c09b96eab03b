"""Stages of a run: logged, nested, visible to reporters, labelling cmdstanpy's bars."""

from __future__ import annotations

import io
import logging
import re
from typing import Any

import pytest

from pemc_stan.backend import progress
from pemc_stan.backend.progress import STAGE_ATTRIBUTE, current, format_elapsed, stage


def test_stages_nest_and_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="pemc_stan.backend.progress")
    assert current() is None
    with stage("CT round 2 of 3", bar="CT round 2/3") as outer:
        assert current() is outer
        with stage("sampling 4 chains x 1000 draws") as inner:
            assert current() is inner and inner.parent is outer
            assert inner.description == "CT round 2 of 3: sampling 4 chains x 1000 draws"
            assert inner.bar_label == "CT round 2/3"
        assert current() is outer
    assert current() is None
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records[:2] == [(logging.INFO, "CT round 2 of 3"),
                           (logging.INFO, "CT round 2 of 3: sampling 4 chains x 1000 draws")]
    assert records[2][0] == logging.DEBUG and records[2][1].startswith(
        "CT round 2 of 3: sampling 4 chains x 1000 draws: done after 00:0")
    assert all(getattr(r, STAGE_ATTRIBUTE).label for r in caplog.records)


def test_a_failing_stage_ends_too() -> None:
    with pytest.raises(ZeroDivisionError), stage("doomed"):
        1 / 0  # noqa: B018
    assert current() is None


def test_elapsed_time_format() -> None:
    assert [format_elapsed(s) for s in (0, 42.9, 61, 3600 + 62)] == [
        "00:00", "00:42", "01:01", "1:01:02"]


def test_cmdstanpy_bars_carry_the_stage_label(monkeypatch: pytest.MonkeyPatch) -> None:
    """cmdstanpy makes its bars with ``cmdstanpy.model.tqdm(desc="chain 1", ...)``."""
    import cmdstanpy.model

    made: list[dict[str, Any]] = []

    def fake_tqdm(*args: Any, **kwargs: Any) -> None:
        made.append(kwargs)

    monkeypatch.setattr(cmdstanpy.model, "tqdm", fake_tqdm)
    with stage("follow-up 1: adapt_delta 0.8 -> 0.95", bar="follow-up 1"), \
            stage("CT round 4 of 4", bar="CT round 4/4"), stage("sampling"):
        cmdstanpy.model.tqdm(total=10, desc="chain 1")
    assert made == [{"total": 10, "desc": "follow-up 1, CT round 4/4 chain 1"}]
    assert cmdstanpy.model.tqdm is fake_tqdm  # put back
    assert progress._bars_original is None


def test_a_stage_its_inner_stages_name_may_start_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pemc_stan.backend.progress")
    with stage("follow-up 1: iter_sampling 1000 -> 2000", announce=False), stage("sampling"):
        pass
    assert [r.getMessage() for r in caplog.records] == [
        "follow-up 1: iter_sampling 1000 -> 2000: sampling"]


def test_progress_is_shown_by_default_on_a_terminal_or_in_a_notebook(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from pemc_stan.backend.progress import interactive

    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not interactive()
    monkeypatch.setitem(sys.modules, "ipykernel", sys)  # a Jupyter kernel is running
    assert interactive()
    monkeypatch.delitem(sys.modules, "ipykernel")
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert interactive()


def test_stage_lines_print_the_stages_of_the_block_and_leave_logging_as_it_was() -> None:
    import logging

    from pemc_stan.backend import progress

    log = logging.getLogger(progress.__name__)
    before = (log.level, log.propagate, list(log.handlers))
    out = io.StringIO()
    with progress.stage_lines(out):
        with progress.stage("pilot: mode search"):
            pass
    with progress.stage("after the block"):
        pass
    assert re.fullmatch(r"\[pemc-stan \d\d:\d\d\] pilot: mode search\n", out.getvalue())
    assert (log.level, log.propagate, list(log.handlers)) == before


def test_stage_lines_add_nothing_where_the_application_shows_the_stages() -> None:
    import logging

    from pemc_stan.backend import progress

    log = logging.getLogger(progress.__name__)
    theirs = io.StringIO()
    handler = logging.StreamHandler(theirs)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        ours = io.StringIO()
        with progress.stage_lines(ours):
            with progress.stage("sampling"):
                pass
        assert ours.getvalue() == "" and theirs.getvalue() == "sampling\n"
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)


def test_sample_resolves_show_progress_once_at_the_front_door(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pemc_stan
    from pemc_stan.backend import progress
    from pemc_stan.run import pipeline

    seen: list[bool] = []
    monkeypatch.setattr(pipeline, "run", lambda inputs, **kw: seen.append(
        inputs.sampler.show_progress))
    program = "parameters { real x; } model { x ~ normal(0, 1); }"
    for shown in (True, False):
        monkeypatch.setattr(progress, "interactive", lambda shown=shown: shown)
        pemc_stan.sample(program, seed=1)
    pemc_stan.sample(program, seed=1, show_progress=False)
    assert seen == [True, False, False]
