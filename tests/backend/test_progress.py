"""Stages of a run: logged, nested, visible to reporters, labelling cmdstanpy's bars."""

from __future__ import annotations

import logging
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
