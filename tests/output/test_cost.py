"""The cost line a run prints and its report shows."""

from __future__ import annotations

from pemc_stan.output.cost import cost_line
from pemc_stan.sampling.follow_up import FollowUp


def test_the_cost_line_names_each_stage_and_the_total() -> None:
    line = cost_line({"search": 1.12, "split": 9.81, "estimate": 1.5, "follow_ups": 0.01})
    assert line == "12.4 s: search 1.1, mode split 9.8, estimate and checks 1.5"


def test_a_run_s_record_gives_its_cost_by_stage() -> None:
    record = FollowUp(4.0, first_gradients=1000, spent=3000)
    record.seconds = {"search": 0.5, "method": 2.0, "follow_ups": 1.5}
    record.stage_gradients = {"method": 1000, "follow_ups": 2000}
    assert record.cost() == {"seconds": 4.0, "stage_seconds": record.seconds,
                             "stage_gradients": record.stage_gradients, "gradients": 3000}
    assert record.cost_line() == "4.0 s: search 0.5, tempered run 2.0, follow-ups 1.5"
    assert "seconds" not in str(record.as_dict())  # the results' record stays the machine's
