"""``pemc-stan evidence``: estimate log Z of a model, running what the estimator needs."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from pemc_stan.cli.console import quiet_cmdstanpy
from pemc_stan.cli.errors import ExitCode, cmdstan_error
from pemc_stan.cli.files import MODEL_HELP, model_and_data, read_data, read_model
from pemc_stan.cli.options import add_sampler_options
from pemc_stan.estimators.evidence import evidence
from pemc_stan.output.folder import check_output_file, write_text_atomically
from pemc_stan.output.writers import json_safe

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add the ``evidence`` subcommand."""
    p = sub.add_parser(
        "evidence", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="estimate the log normalising constant (log evidence) log Z",
        description=textwrap.fill(
            "Estimate log Z of MODEL.stan with DATA.json (log marginal likelihood, all "
            "constants kept), running what the estimator needs (NUTS for bridge sampling, "
            "Pathfinder for importance sampling, continuous tempering for ct/ti).", 79),
        epilog="example: pemc-stan evidence model.stan --data data.json --method bridge")
    p.add_argument("model", metavar="MODEL.stan", help=MODEL_HELP)
    p.add_argument("--data", metavar="DATA.json", help="data file (CmdStan JSON)")
    p.add_argument("--method", default=None, metavar="METHOD",
                   help="estimator of pemc_stan.evidence: bridge (default; bridge "
                        "sampling on NUTS draws), is (Pathfinder importance "
                        "sampling), ct (continuous tempering, eq 20), ti "
                        "(thermodynamic integration over CT draws)")
    add_sampler_options(p)
    p.add_argument("--json", metavar="OUT.json", help="also write the estimate here")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> ExitCode:
    """Estimate and print log Z.

    Raises
    ------
    OptionsError, StanProgramError, DataError, CliError, RuntimeError
        For bad options, programs, data, files, or a CmdStan failure.
    """
    quiet_cmdstanpy(args.debug)
    json_path = check_output_file(args.json) if args.json else None  # before any work
    model, data_path = model_and_data(args)
    program = read_model(model)
    data = read_data(program, model, data_path)
    kwargs: dict[str, Any] = {"chains": args.chains, "iter_warmup": args.iter_warmup,
                              "iter_sampling": args.iter_sampling, "seed": args.seed}
    if args.method is not None:
        kwargs["method"] = args.method.replace("-", "_")
    try:
        estimate = evidence(program, data, **kwargs)
    except RuntimeError as exc:
        mapped = cmdstan_error(exc, data_path)
        if mapped is exc:
            raise
        raise mapped from exc
    print(f"log Z = {estimate.log_z:.6g} +/- {estimate.std_error:.3g} ({estimate.method})")
    for key, value in (estimate.diagnostics or {}).items():
        if isinstance(value, (int, float, str)):
            if key != "verdict":
                print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    verdict = (estimate.diagnostics or {}).get("verdict", "ok")
    reasons = (estimate.diagnostics or {}).get("reasons", [])
    print(f"verdict: {verdict}" if not reasons else "verdict: SUSPECT")
    for reason in reasons:
        print(f"  - {reason}")
    if json_path is not None:
        write_text_atomically(json_path, json.dumps(json_safe(
            {"log_z": estimate.log_z, "std_error": estimate.std_error,
             "method": estimate.method, "diagnostics": estimate.diagnostics}), indent=2) + "\n")
    return ExitCode.SUSPECT if reasons else ExitCode.OK
