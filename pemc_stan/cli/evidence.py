"""``pemc-stan evidence``: estimate log Z of a model, running what the estimator needs.

The estimator is chosen with ``--estimator``; ``--method``, its former name, is
still accepted (with a deprecation warning on standard error): in ``pemc-stan
sample`` a method is a sampling method.  The estimators that run a method (``ct``,
``ti``: continuous tempering) take its options (``--bootstrap-rounds``, ...) and
every estimator that runs NUTS the sampler's flags (``--adapt-delta``, ``--inits``,
...), as ``pemc-stan sample`` does.  Without ``--seed`` one is drawn, printed and
recorded.
"""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from typing import Any

from pemc_stan.cli.errors import ExitCode, cmdstan_error
from pemc_stan.cli.files import MODEL_HELP, existing_file, model_and_data, read_data, read_model
from pemc_stan.cli.options import (
    add_method_options,
    add_sampler_options,
    flag_of,
    method_options,
    sampler_options,
    seed_line,
)
from pemc_stan.errors import CliError
from pemc_stan.methods import registry
from pemc_stan.output.folder import check_output_file, write_text_atomically
from pemc_stan.output.json_values import json_safe
from pemc_stan.run.evidence import evidence
from pemc_stan.run.evidence_options import canonical_estimator
from pemc_stan.run.pipeline import SamplerArgs

__all__ = ["add_parser", "run"]

logger = logging.getLogger(__name__)

#: Said on standard error (once) when the deprecated ``--method`` names the estimator.
METHOD_DEPRECATED = "--method is deprecated for 'pemc-stan evidence'; use --estimator"


def add_parser(sub: Any) -> None:
    """Add the ``evidence`` subcommand."""
    p = sub.add_parser(
        "evidence", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="estimate the log normalising constant (log evidence) log Z",
        description=textwrap.fill(
            "Estimate log Z of MODEL.stan with DATA.json (log marginal likelihood, all "
            "constants kept), running what the estimator needs (NUTS for bridge sampling, "
            "Pathfinder for importance sampling, continuous tempering for ct/ti).", 79),
        epilog="example: pemc-stan evidence model.stan --data data.json --estimator bridge")
    p.add_argument("model", metavar="MODEL.stan", help=MODEL_HELP)
    p.add_argument("--data", metavar="DATA.json", help="data file (CmdStan JSON)")
    p.add_argument("--estimator", default=None, metavar="ESTIMATOR",
                   help="estimator of pemc_stan.evidence: bridge (default; bridge "
                        "sampling on NUTS draws), is (Pathfinder importance "
                        "sampling), ct (continuous tempering, eq 20), ti "
                        "(thermodynamic integration over CT draws)")
    p.add_argument("--method", default=None, metavar="METHOD",
                   help="deprecated spelling of --estimator")
    add_sampler_options(p)
    add_method_options(p, method_flag=False)  # for the estimators that run a method
    p.add_argument("--json", metavar="OUT.json", help="also write the estimate here")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> ExitCode:
    """Estimate and print log Z.

    Raises
    ------
    OptionsError, StanProgramError, DataError, CliError, RuntimeError
        For bad options (``--estimator`` and ``--method`` both given is a
        usage error), programs, data, files, or a CmdStan failure.
    """
    estimator = _estimator(args)
    options = _method_options(args, estimator)
    given = sampler_options(args)
    if isinstance(given.get("inits"), str):
        existing_file(given["inits"], "inits file")
    sampler = SamplerArgs(**given).validate().seeded()  # one seed for everything
    json_path = check_output_file(args.json) if args.json else None  # before any work
    model, data_path = model_and_data(args)
    program = read_model(model)
    data = read_data(program, model, data_path)
    kwargs: dict[str, Any] = {"chains": sampler.chains, "iter_warmup": sampler.iter_warmup,
                              "iter_sampling": sampler.iter_sampling, "seed": sampler.seed,
                              **sampler.cmdstan_kwargs(), **options}
    if estimator is not None:
        kwargs["estimator"] = estimator.replace("-", "_")
    try:
        estimate = evidence(program, data, **kwargs)
    except RuntimeError as exc:
        mapped = cmdstan_error(exc, data_path)
        if mapped is exc:
            raise
        raise mapped from exc
    print(f"log Z = {estimate.log_z:.6g} +/- {estimate.std_error:.3g} ({estimate.method})")
    print(seed_line(sampler.seed, "seed" in given))
    for key, value in (estimate.diagnostics or {}).items():
        if isinstance(value, (int, float, str)):
            if key not in ("verdict", "seed"):
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


def _method_options(args: argparse.Namespace, estimator: str | None) -> dict[str, Any]:
    """The method options given, checked against the method the estimator runs.

    Raises
    ------
    CliError
        If options are given for an estimator that runs no method (a usage error).
    OptionsError
        If an option is invalid or belongs to another method.
    """
    given = method_options(args)
    name = canonical_estimator((estimator or "bridge").replace("-", "_"))
    if not given or name is None:  # an unknown estimator is reported by evidence()
        return given
    owner = registry.for_estimator(name)
    if owner is None:
        flags = ", ".join(flag_of(n) for n in given)
        running = ", ".join(f"{' or '.join(m.estimators)} ({m.label})"
                            for m in registry.methods() if m.estimators)
        raise CliError(f"{flags}: options of a sampling method, but the {name} estimator "
                       "runs none (it works on draws of the model itself)",
                       f"drop {flags}, or use an estimator that runs a method: {running}",
                       ExitCode.USAGE)
    owner.build_options(**given)  # checked before any work
    return given


def _estimator(args: argparse.Namespace) -> str | None:
    """The estimator named by ``--estimator`` or by the deprecated ``--method`` (None: the
    default).

    Raises
    ------
    CliError
        If both are given (a usage error).
    """
    if args.method is None:
        return str(args.estimator) if args.estimator is not None else None
    if args.estimator is not None:
        raise CliError(f"--estimator {args.estimator} and --method {args.method} both name "
                       "the estimator", "give --estimator alone (--method is deprecated)",
                       ExitCode.USAGE)
    logger.warning(METHOD_DEPRECATED)
    return str(args.method)
