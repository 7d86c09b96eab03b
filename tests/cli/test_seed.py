"""Every run can be repeated: a seed is drawn when none is given, used for everything,
printed and recorded (``estimates.json``, the InferenceData's ``pemc_seed``, an
evidence estimate's diagnostics).  The fast tests never compile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pemc_stan
from pemc_stan.cli import ExitCode, main
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.methods import registry
from pemc_stan.output.fit_protocol import fit_seed
from pemc_stan.run.pipeline import SEED_DRAW_BOUND, SamplerArgs, draw_seed
from pemc_stan.sampling.model import Found

ROOT = Path(__file__).resolve().parents[2]
NORMAL = ROOT / "models" / "normal_normal" / "normal_normal.stan"
NORMAL_DATA = ROOT / "models" / "normal_normal" / "data.json"
MODEL = "parameters { real mu; } model { mu ~ normal(0, 1); }"


def test_sampler_args_draw_a_seed_when_none_is_given() -> None:
    drawn = SamplerArgs().validate().seeded()
    assert isinstance(drawn.seed, int) and 0 <= drawn.seed < SEED_DRAW_BOUND
    # room for the seeds derived from it (rounds seed + r, follow-ups seed + 1000 k)
    assert SEED_DRAW_BOUND + 1000 * 100 < 2**32 - 1
    assert SamplerArgs(seed=7).seeded().seed == 7
    assert SamplerArgs(seed=0).seeded().seed == 0
    assert len({draw_seed() for _ in range(20)}) > 1  # drawn afresh each time


def _capture_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    """Replace the CT model's run and the follow-ups by recorders of their seeds."""
    seeds: list[tuple[str, int | None]] = []

    class Fit:
        run_seed: int | None = None
        seed: int | None = None
        later_checks: tuple[Any, ...] = ()

        def gradients(self) -> int:
            return 0

    def fake_sample(self: Any, **kwargs: Any) -> Fit:
        seeds.append(("sample", kwargs["seed"]))
        fit = Fit()
        fit.seed = kwargs["seed"] + 1  # e.g. the last bootstrap round's own seed
        return fit

    def fake_follow_up(model: Any, fit: Fit, **kwargs: Any) -> Fit:
        seeds.append(("follow_up", kwargs["seed"]))
        return fit

    monkeypatch.setattr(registry.get("ct").model, "search_modes", lambda self, seed: Found())
    monkeypatch.setattr(registry.get("ct").model, "sample", fake_sample)
    monkeypatch.setattr("pemc_stan.run.conductor.follow_up", fake_follow_up)
    return seeds


def test_sample_without_a_seed_uses_one_drawn_seed_for_everything(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = _capture_runs(monkeypatch)
    fit = pemc_stan.sample(MODEL, method="ct")
    [(_, first), (_, later)] = seeds
    assert isinstance(first, int) and first == later == fit.run_seed
    assert fit_seed(fit) == first  # what estimates.json and pemc_seed record
    seeds.clear()
    fit = pemc_stan.sample(MODEL, method="ct", seed=12)
    assert seeds == [("sample", 12), ("follow_up", 12)] and fit_seed(fit) == 12


def test_fit_seed_falls_back_to_the_fits_own() -> None:
    class Fit:
        run_seed = None
        seed = 5

    assert fit_seed(Fit()) == 5


def test_the_command_line_prints_the_drawn_seed(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``evidence`` (no compiling with the estimator stubbed): a drawn seed is printed with
    how to repeat the run, a given one without."""
    calls: list[dict[str, Any]] = []

    def fake(program: Any, data: Any, **kwargs: Any) -> EvidenceEstimate:
        calls.append(kwargs)
        return EvidenceEstimate(-1.0, 0.1, "bridge", {"seed": kwargs["seed"]})

    monkeypatch.setattr("pemc_stan.cli.evidence.evidence", fake)
    args = ["evidence", str(NORMAL), "--data", str(NORMAL_DATA)]
    assert main(args) == ExitCode.OK
    seed = calls[-1]["seed"]
    assert f"seed: {seed} (drawn; pass --seed {seed} to repeat)" in capsys.readouterr().out
    assert main([*args, "--seed", str(seed)]) == ExitCode.OK
    assert calls[-1]["seed"] == seed
    out = capsys.readouterr().out.splitlines()
    assert f"seed: {seed}" in out and "drawn" not in "\n".join(out)


def test_evidence_without_a_seed_draws_and_records_one(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[int | None] = []

    def fake_from_model(model: Any, prog: Any, data: Any, m: str, opts: Any, *_: Any
                        ) -> tuple[EvidenceEstimate, list[str]]:
        used.append(opts.seed)
        return EvidenceEstimate(-1.0, 0.1, m, {}), []

    monkeypatch.setattr("pemc_stan.run.evidence_sources._from_model", fake_from_model)
    data = json.loads(NORMAL_DATA.read_text())
    estimate = pemc_stan.evidence(str(NORMAL), data)
    [seed] = used
    assert isinstance(seed, int) and estimate.diagnostics["seed"] == seed
    estimate = pemc_stan.evidence(str(NORMAL), data, seed=9)
    assert used[-1] == 9 and estimate.diagnostics["seed"] == 9


@pytest.mark.compiled
def test_a_run_without_seed_records_the_seed_it_drew(cmdstan_installation: object,
                                                      tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """``pemc-stan sample`` without ``--seed``: the seed printed is the integer in
    ``estimates.json`` and the InferenceData; passing it repeats the run's draws."""
    import arviz as az

    common = ["sample", str(NORMAL), "--data", str(NORMAL_DATA), "--method", "ct",
              "--chains", "2", "--iter-warmup", "200", "--iter-sampling", "200",
              "--budget", "1"]
    first = tmp_path / "first"
    assert main([*common, "--output-dir", str(first)]) in (ExitCode.OK, ExitCode.SUSPECT,
                ExitCode.SUSPECT_FINAL)
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("seed: "))
    seed = int(line.split()[1])
    assert line == f"seed: {seed} (drawn; pass --seed {seed} to repeat)"
    estimates = json.loads((first / "estimates.json").read_text())
    assert estimates["sampler"]["seed"] == seed and isinstance(estimates["sampler"]["seed"], int)
    idata = az.from_netcdf(str(first / "normal_normal.nc"))
    assert int(idata.posterior.attrs["pemc_seed"]) == seed

    again = tmp_path / "again"
    assert main([*common, "--seed", str(seed), "--output-dir", str(again)]) in (
        ExitCode.OK, ExitCode.SUSPECT,
                ExitCode.SUSPECT_FINAL)
    assert f"seed: {seed}\n" in capsys.readouterr().out
    repeated = json.loads((again / "estimates.json").read_text())
    assert repeated["expectations"] == estimates["expectations"]


def _count_settling(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """Count how often a seed is settled (``SamplerArgs.seeded``) and the method's program
    is parsed to check the inits (the generated program, read by ``check_inits``)."""
    import pemc_stan.run.pipeline as pipeline

    seeded, parsed = [], []
    real_seeded, real_read = SamplerArgs.seeded, pipeline.read_program

    def counted_seeded(self: SamplerArgs) -> SamplerArgs:
        seeded.append(1)
        return real_seeded(self)

    def counted_read(source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(source, str) and "pemc_" in source:
            parsed.append(1)
        return real_read(source, *args, **kwargs)

    monkeypatch.setattr(SamplerArgs, "seeded", counted_seeded)
    monkeypatch.setattr(pipeline, "read_program", counted_read)
    return seeded, parsed


def test_the_seed_and_the_inits_check_are_decided_once_per_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """From Python and from the command line, the seed is settled and the inits are checked
    against the method's program once (the command line settles them before its output
    folder is made, and the run carries them down)."""
    seeds = _capture_runs(monkeypatch)
    seeded, parsed = _count_settling(monkeypatch)
    pemc_stan.sample(MODEL, method="ct", inits={"mu": 0.5})
    assert (len(seeded), len(parsed), len(seeds)) == (1, 1, 2)

    def save_fit(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("stopped where the command line saves the fit")

    monkeypatch.setattr("pemc_stan.cli.sample.save_fit", save_fit)
    seeded.clear(), parsed.clear(), seeds.clear()
    stan = tmp_path / "m.stan"
    stan.write_text(MODEL)
    inits = tmp_path / "inits.json"
    inits.write_text(json.dumps({"mu": 0.5}))
    code = main(["sample", str(stan), "--method", "ct", "--inits", str(inits),
                 "--output-dir", str(tmp_path / "out")])
    assert code != ExitCode.OK  # the saving was stopped, as planned
    assert (len(seeded), len(parsed), len(seeds)) == (1, 1, 2)
