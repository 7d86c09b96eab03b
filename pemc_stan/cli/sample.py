"""``pemc-stan sample``: run a method; print a summary; write InferenceData, CSVs, estimates."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from pathlib import Path
from typing import Any

from pemc_stan.cli.console import cli_words
from pemc_stan.cli.errors import ExitCode, cmdstan_error
from pemc_stan.cli.files import MODEL_HELP, existing_file, model_and_data, read_data, read_model
from pemc_stan.cli.options import (
    add_method_options,
    add_sampler_options,
    method_options,
    sampler_options,
    seed_line,
)
from pemc_stan.cli.report import report_files
from pemc_stan.methods import registry
from pemc_stan.output.cost import cost_line
from pemc_stan.output.folder import RunFolder
from pemc_stan.output.writers import save_fit
from pemc_stan.run.pipeline import SamplerArgs, settle
from pemc_stan.run.pipeline import run as run_method
from pemc_stan.sampling.follow_up import DEFAULT_BUDGET

__all__ = ["add_parser", "run", "EPILOG"]

EPILOG = """\
output directory (--output-dir, default ./<model>_<method>_output):
  <model>.nc       ArviZ InferenceData (NetCDF): posterior = resampled draws of the
                   original parameters, transformed parameters and generated
                   quantities; sample_stats = NUTS statistics, beta, log weights
                   and weights (PE: one per pseudo-sample; CT: also delta), weight
                   ESS; extended_posterior = the extended-space draws (their beta
                   and weights are sample_stats'); observed_data / constant_data;
                   attributes = method, options, seed, log Z
  cmdstan/         the raw CmdStan CSV files of the run the verdict judged (earlier
                   runs in sub-folders: mode_split/, round_k/, follow_up_k/, ...)
  estimates.json   method, options, sampler settings with the seed (given or drawn),
                   weighted expectations with MCSE, log Z when available, diagnostics
  summary.csv      the summary table printed (one row per parameter element)
  stan/            your program (<model>.stan) and the generated one
                   (<model>_<method>.stan)
  modes.json       the modes the pilot's search found (when it searched)
  plots/           PNG pictures: trace.png (marginal and trace of the parameters),
                   temperature.png (beta), weights.png, modes.png (the pilot's
                   modes over the draws), log_z.png (when log Z is estimated)
  report.html      one self-contained page: verdict, reasons and remedies, summary,
                   log Z, diagnostics, pictures, the generated program (plots/ and
                   report.html: not with --no-plots; 'pemc-stan report DIR' rebuilds
                   them)
  partial-run/     only after a failed or interrupted run: its output so far (the
                   files above are then those of the earlier run, unchanged)

exit codes: 0 ok, 2 usage, 3 missing file, 4 Stan program error, 5 data error,
6 unsupported construct, 7 CmdStan runtime, 8 the fit's verdict is suspect and a larger
budget can still change it, 11 it is suspect and no remedy is left,
9 output folder or file unusable or in use by another run, 130 interrupted
(128 + N for signal N: 143 SIGTERM, 129 SIGHUP)
"""


def add_parser(sub: Any) -> None:
    """Add the ``sample`` subcommand."""
    p = sub.add_parser(
        "sample", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="sample with a method; write InferenceData, CSVs, weights and estimates",
        description=textwrap.fill(
            "Transform MODEL.stan, compile it (cached), run CmdStan's NUTS on the extended "
            "target (progress bars when standard error is a terminal, or with --progress), "
            "print a summary of the original parameters with R-hat/ESS and the method's "
            "diagnostics, and write the results to the output directory.", 79),
        epilog=EPILOG)
    p.add_argument("model", metavar="MODEL.stan", help=MODEL_HELP)
    p.add_argument("--data", metavar="DATA.json", help="data file (CmdStan JSON)")
    add_method_options(p, default=registry.get(registry.DEFAULT_METHOD).short)
    add_sampler_options(p)
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="B",
                   help="follow-up runs that apply the verdict's remedies (a higher "
                        "adapt_delta, more draws from where the run ended) may take all runs "
                        f"together to B times the first attempt's gradients (default "
                        f"{DEFAULT_BUDGET:g}; 1: no follow-up)")
    p.add_argument("--output-dir", metavar="DIR",
                   help="output directory (default ./<model>_<method>_output); it holds one "
                        "run: locked while the run lasts, written only when the run succeeds")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results of an earlier run in the output directory "
                        "(without it such a directory is refused)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars (default: when standard error is a terminal)")
    p.add_argument("--plots", action=argparse.BooleanOptionalAction, default=True,
                   help="draw the pictures (plots/*.png) and write report.html (default); "
                        "--no-plots writes neither ('pemc-stan report DIR' can later)")
    p.set_defaults(handler=run)


def _shown(value: Any) -> str:
    """A diagnostics value on one line: floats to 4 significant figures, sequences in
    parentheses, mappings as ``key=value`` pairs."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_shown(v) for v in value) + ")"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_shown(v)}" for k, v in value.items())
    return str(value)


def _print_report(label: str, model: Path, sampler: SamplerArgs, seed_given: bool,
                  saved: Any, shape: tuple[int, int]) -> None:
    import pandas as pd

    with pd.option_context("display.width", 120, "display.max_columns", 20,
                           "display.float_format", "{:.4g}".format):
        # the judged (last) run's draws: after thinning, and after any follow-up
        print(f"{label} fit of {model.name}: {shape[0]} chains x {shape[1]} draws")
        print(seed_line(sampler.seed, seed_given))
        print("weighted means (mean, mcse, ess_mean; khat: their terms' tail) and resampled "
              "draws (sd, 90% interval, ESS, R-hat as the verdict judges them):")
        print(saved.table.to_string())
    print("diagnostics:")
    for key, value in saved.diagnostics.items():
        if key == "messages":
            continue
        if key == "follow_up":
            for step in value:
                print(f"  follow-up: {cli_words(str(step))}")
            continue
        # a sentence may give advice; a record's key=value pairs are not flags
        print(f"  {key}: {cli_words(value) if isinstance(value, str) else _shown(value)}")
    for message in saved.diagnostics.get("messages", []):
        print(f"  advice: {cli_words(str(message))}")
    log_z = saved.log_z
    if log_z is not None and log_z.get("undefined"):
        print(f"log Z: undefined ({log_z['undefined']})")
    elif log_z is not None:
        print(f"log Z = {log_z['log_z']:.4f} +/- {log_z['std_error']:.4f} ({log_z['method']})")
    print(cli_words(str(saved.verdict)))
    cost = saved.estimates.get("cost") or {}
    if cost.get("stage_seconds"):
        print(f"cost: {cost_line(cost['stage_seconds'])}")
    print(f"wrote {', '.join(saved.files)} in {saved.folder}")


def run(args: argparse.Namespace) -> ExitCode:
    """Sample, summarise and save.

    Raises
    ------
    OptionsError, StanProgramError, DataError, CliError, RuntimeError
        For bad options, programs, data, files, or a CmdStan failure.
    """
    model, data_path = model_and_data(args)
    spec = registry.get(args.method)
    options = spec.build_options(**method_options(args))  # checked before compiling
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    given = sampler_options(args)
    if isinstance(given.get("inits"), str):
        existing_file(given["inits"], "inits file")
    sampler = SamplerArgs(show_progress=show_progress, budget=args.budget, **given).validate()
    program = read_model(model)  # syntax errors before anything else
    data = read_data(program, model, data_path)
    result = spec.transform_program(program, options)
    inputs = settle(result, data, sampler)  # one seed for everything; inits checked once
    sampler = inputs.sampler
    out = (Path(args.output_dir) if args.output_dir
           else Path.cwd() / f"{model.stem}_{spec.short}_output")
    with RunFolder(out, overwrite=args.overwrite) as run:  # checked and locked before compiling
        try:
            fit = run_method(inputs, output_dir=str(run.staging / "cmdstan"))
            saved = save_fit(fit, run.staging, name=model.stem, model_label=str(model),
                             data_label=str(data_path) if data_path is not None else None,
                             sampler=sampler.record())
            if args.plots:  # a picture or the report failing is a warning, never the run's end
                saved = dataclasses.replace(
                    saved, files=saved.files + tuple(report_files(run.staging)))
        except KeyboardInterrupt as exc:
            exc.partial = run.staging  # type: ignore[attr-defined]  # named by main()
            raise
        except RuntimeError as exc:
            mapped = cmdstan_error(exc, data_path)
            if mapped is exc:
                raise
            raise mapped from exc
        run.commit()
    saved = dataclasses.replace(saved, folder=out)
    shape = (int(fit.fit.chains), int(fit.fit.num_draws_sampling))
    _print_report(fit.title(), model, sampler, "seed" in given, saved, shape)
    if saved.verdict.ok:
        return ExitCode.OK
    return _suspect_end(fit.follow_up, sampler.seed)


def _suspect_end(record: Any, seed: int | None = None) -> ExitCode:
    """Print what is left to do for a suspect fit, and its exit code: 8 while a larger
    budget can still change the verdict (the next rung of the ladder,
    :meth:`~pemc_stan.sampling.follow_up.FollowUp.next_budget`), 11 when no remedy is left
    (the ladder's end: a reason no run fixes, or the largest budget advised).  The
    command to run next keeps ``seed``: the same run, followed further."""
    if record is not None and not record.remedy_left:
        print(cli_words(record.final_statement()))
        return ExitCode.SUSPECT_FINAL
    budget = DEFAULT_BUDGET if record is None else record.budget
    larger = record.next_budget() if record is not None else 2 * DEFAULT_BUDGET
    again = f" --seed {seed}" if seed is not None else ""
    print(f"remedy left: --budget {larger:g} lets the follow-ups go on (it was {budget:g}): "
          f"run the same command with --budget {larger:g}{again} --overwrite (the same run, "
          "followed further; or another --output-dir to keep this one)")
    return ExitCode.SUSPECT
