"""The ``pemc-stan`` command line.

Subcommands: ``transform`` (print the transformed program), ``sample`` (run a
method and write its results), ``evidence`` (estimate log Z) and ``runtime``.
Every subcommand returns an :class:`ExitCode`; errors are reported as one line
of cause and one line of remedy::

    pemc-stan: error: <what went wrong>
    pemc-stan: remedy: <what to do>

with the Python traceback only under ``--debug``.  Only the command line
configures logging.
"""

from __future__ import annotations

import argparse
import enum
import json
import logging
import math
import re
import sys
import textwrap
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pemc_stan import __version__

from pemc_stan.stan import ast

from pemc_stan.backend import runtime
from pemc_stan.errors import (
    PemcStanError,
    StanProgramError,
    StanSemanticError,
    StanSyntaxError,
    UnsupportedConstructError,
)

logger = logging.getLogger(__name__)


class ExitCode(enum.IntEnum):
    """Process exit codes of ``pemc-stan``."""

    OK = 0
    ERROR = 1
    USAGE = 2
    MISSING_FILE = 3
    STAN_PROGRAM = 4
    DATA = 5
    UNSUPPORTED = 6
    RUNTIME = 7
    INTERRUPTED = 130


class CliError(Exception):
    """An error the command line reports as cause + remedy with a given exit code.

    Attributes
    ----------
    cause, remedy
        One line each.
    code
        The exit code.
    """

    def __init__(self, cause: str, remedy: str, code: ExitCode) -> None:
        super().__init__(cause)
        self.cause = cause
        self.remedy = remedy
        self.code = code


#: ``--method`` spellings accepted by the command line.
METHOD_CHOICES = ("pseudo-extended", "continuous-tempering", "pe", "ct",
                  "pseudo_extended", "continuous_tempering")

_PE_FLAGS = {"n_pseudo": "--n-pseudo", "beta": "--beta", "beta_prior": "--beta-prior",
             "instrumental": "--instrumental", "beta_min": "--beta-min",
             "noncentring": "--noncentring", "log_scale": "--log-scale"}
_CT_FLAGS = {"base": "--base", "base_covariance": "--base-covariance",
             "bootstrap_rounds": "--bootstrap-rounds", "log_zeta": "--log-zeta"}

SAMPLE_EPILOG = """\
output directory (--output-dir, default ./<model>_<pe|ct>_output):
  <model>.nc       ArviZ InferenceData (NetCDF): posterior = resampled draws of the
                   original parameters, transformed parameters and generated
                   quantities; sample_stats = NUTS statistics, beta, weights, weight
                   ESS; extended_posterior = the extended-space draws with log weights;
                   observed_data / constant_data; attributes = method, options, log Z
  cmdstan/         the raw CmdStan CSV files of the extended run
  gq/              the original model's generated quantities on the resampled draws
                   (when it has transformed parameters or generated quantities)
  weights.csv      per draw: chain, draw, beta and log weights
                   (PE: one beta_k / log_weight_k per pseudo-sample k;
                    CT: beta, delta, log_weight = log w1)
  estimates.json   method, options, weighted expectations with MCSE, log Z when
                   available, diagnostics

exit codes: 0 ok, 2 usage, 3 missing file, 4 Stan program error, 5 data error,
6 unsupported construct, 7 CmdStan runtime, 130 interrupted
"""


# --------------------------------------------------------------------------- #
# argument helpers
# --------------------------------------------------------------------------- #


def _canonical_method(method: str) -> str:
    from pemc_stan.methods.registry import _canonical

    return _canonical(method.replace("-", "_"))


def _beta_density(text: str) -> Any:
    """``uniform`` or ``A,B`` -> the options' form."""
    if text.strip().lower() == "uniform":
        return "uniform"
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not 'uniform' or 'A,B' (Beta shape parameters, e.g. 2,2)") from None
    return (a, b)


def _beta_ladder(text: str) -> Any:
    """``estimate`` or a comma-separated ladder."""
    if text.strip().lower() == "estimate":
        return "estimate"
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not 'estimate' or a comma-separated ladder such as 0.1,0.5,1") from None


def _add_method_options(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--method", choices=METHOD_CHOICES, default=None if required else "pe",
                   required=required, metavar="METHOD",
                   help="pseudo-extended (pe) or continuous-tempering (ct)"
                        + ("" if required else "; default pe"))
    p.add_argument("--temper", choices=("posterior", "likelihood"), default=None,
                   help="temper the whole density (default) or only the likelihood")
    pe = p.add_argument_group("pseudo-extended options")
    pe.add_argument("--n-pseudo", type=int, default=None, metavar="N",
                    help="number of pseudo-samples (default 2)")
    pe.add_argument("--beta", type=_beta_ladder, default=None, metavar="LADDER",
                    help="'estimate' (default) or a fixed ladder, e.g. 0.1,0.5,1")
    pe.add_argument("--beta-prior", type=_beta_density, default=None, metavar="A,B",
                    help="Beta prior of beta: 'uniform' (default) or A,B")
    pe.add_argument("--instrumental", type=_beta_density, default=None, metavar="A,B",
                    help="instrumental density g of beta: 'uniform' (default) or A,B")
    pe.add_argument("--beta-min", type=float, default=None, metavar="B",
                    help="lower end of beta's support (default 0)")
    pe.add_argument("--noncentring", type=float, default=None, metavar="ALPHA",
                    help="partial non-centring of the pseudo-samples' unconstrained "
                         "coordinates by beta^(-ALPHA/2), ALPHA in [0, 1] (default 0: off)")
    pe.add_argument("--log-scale", type=float, default=None, metavar="X",
                    help="offset log Z^ (default: Pathfinder pilot estimate)")
    ct = p.add_argument_group("continuous-tempering options")
    ct.add_argument("--base", choices=("pathfinder", "advi", "laplace"), default=None,
                    help="how the base density is fitted (default pathfinder)")
    ct.add_argument("--base-covariance", choices=("diag", "dense"), default=None,
                    help="covariance of the base density (default diag)")
    ct.add_argument("--bootstrap-rounds", type=int, default=None, metavar="R",
                    help="rounds of the section-6 bootstrap of base and log zeta")
    ct.add_argument("--log-zeta", type=float, default=None, metavar="X",
                    help="fixed log zeta (default: estimated)")


def _method_options(args: argparse.Namespace, method: str) -> dict[str, Any]:
    """Keyword options of the chosen method; flags of the other method are usage errors."""
    mine, other = (_PE_FLAGS, _CT_FLAGS) if method == "pseudo_extended" else (_CT_FLAGS,
                                                                              _PE_FLAGS)
    for key, flag in other.items():
        if getattr(args, key, None) is not None:
            raise CliError(f"{flag} is not an option of --method {method.replace('_', '-')}",
                           f"drop {flag}, or choose the method it belongs to",
                           ExitCode.USAGE)
    options = {key: getattr(args, key) for key in mine if getattr(args, key, None) is not None}
    if args.temper is not None:
        options["temper"] = args.temper
    return options


_MODEL_HELP = ("the Stan program, or a bundled example: example:NAME (its data is used "
               "unless --data is given; example:NAME/DATA picks one of its data files), e.g. "
               "example:bimodal_1d")


def _model_and_data(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """The Stan file and data file of a command: paths, or ``example:NAME[/DATA]``.

    Raises
    ------
    CliError
        With :attr:`ExitCode.MISSING_FILE` for a missing file or an unknown example.
    """
    from pemc_stan.examples import example, is_example

    data_arg = getattr(args, "data", None)
    if is_example(args.model):
        try:
            stan, default_data = example(args.model)
        except (KeyError, FileNotFoundError) as exc:
            raise CliError(str(exc.args[0]), "pass one of the example names listed, or a "
                           ".stan file", ExitCode.MISSING_FILE) from None
        data = _existing_file(data_arg, "data file") if data_arg else default_data
        return stan, data
    model = _existing_file(args.model, "Stan file")
    return model, (_existing_file(data_arg, "data file") if data_arg else None)


def _existing_file(path: str, what: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        where = "is a directory" if p.is_dir() else "does not exist"
        raise CliError(f"{what} {path} {where}",
                       f"check the path (relative paths start at {Path.cwd()})",
                       ExitCode.MISSING_FILE)
    return p


# --------------------------------------------------------------------------- #
# data checks (before anything compiles)
# --------------------------------------------------------------------------- #


def _load_data_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CliError(f"data file {path} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                       f"column {exc.colno}",
                       "write the data as a JSON object {\"name\": value, ...} (CmdStan's "
                       "JSON data format)", ExitCode.DATA) from None
    if not isinstance(data, dict):
        raise CliError(f"data file {path} holds a JSON {type(data).__name__}, not an object",
                       "write the data as a JSON object {\"name\": value, ...}", ExitCode.DATA)
    return data


def _expected_shape(type_: ast.Type, data: dict[str, Any]) -> list[int] | None:
    """Shape a data variable must have, when every size is a literal or an int in ``data``."""
    def size(expr: ast.Expr) -> int | None:
        if isinstance(expr, ast.IntLit):
            return expr.value
        if isinstance(expr, ast.Variable):
            value = data.get(expr.name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    if isinstance(type_, ast.ArrayType):
        inner = _expected_shape(type_.element, data)
        dims = [size(d) for d in type_.dims]
        return None if inner is None or None in dims else [*dims, *inner]  # type: ignore[list-item]
    if not isinstance(type_, ast.BasicType) or "complex" in type_.name:
        return None
    sizes = [size(s) for s in type_.sizes]
    if None in sizes:
        return None
    if type_.name in ("cov_matrix", "corr_matrix", "cholesky_factor_corr") or (
            type_.name == "cholesky_factor_cov" and len(sizes) == 1):
        sizes = sizes * 2
    return sizes  # type: ignore[return-value]


def _json_shape(value: Any) -> list[int] | None:
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            return shape
        value = value[0]
    return shape if isinstance(value, (int, float)) else None


def check_data(program: ast.Program, data: dict[str, Any], data_name: str) -> None:
    """Check that ``data`` has every data-block variable with the declared shape.

    Sizes are checked where they are literals or integer data; CmdStan checks
    the rest (and the constraints) when it reads the data.

    Raises
    ------
    CliError
        With :attr:`ExitCode.DATA`, naming the variable and what was expected.
    """
    from pemc_stan.stan.printer import print_type

    if program.data is None:
        return
    for stmt in program.data.stmts:
        if not isinstance(stmt, ast.VarDecl):
            continue
        declared = print_type(stmt.type)
        for name in stmt.names:
            if name not in data:
                raise CliError(
                    f"{data_name} has no value for '{name}', declared as '{declared} {name}' "
                    f"in the data block (line {stmt.line})",
                    f"add \"{name}\" to {data_name}", ExitCode.DATA)
            expected = _expected_shape(stmt.type, data)
            got = _json_shape(data[name])
            if expected is None or got is None or 0 in expected:
                continue
            if got != expected:
                raise CliError(
                    f"'{name}' in {data_name} has shape {tuple(got)} but '{declared} {name}' "
                    f"needs shape {tuple(expected)}",
                    f"give \"{name}\" {'x'.join(map(str, expected)) or 'a single'} "
                    "value(s), or fix the sizes it is declared with", ExitCode.DATA)


# --------------------------------------------------------------------------- #
# subcommands
# --------------------------------------------------------------------------- #


def _load_and_check_data(program: ast.Program, model: Path,
                         data_path: Path | None) -> dict[str, Any]:
    """Read ``--data`` (if given) and check it against the data block.

    Raises
    ------
    CliError
        With :attr:`ExitCode.DATA` for unreadable or mismatching data, or data
        the program needs but no ``--data`` was given.
    """
    if data_path is None:
        needed = [n for s in (program.data.stmts if program.data else ())
                  if isinstance(s, ast.VarDecl) for n in s.names]
        if needed:
            shown = ", ".join(needed[:6]) + (", ..." if len(needed) > 6 else "")
            raise CliError(f"{model.name} declares data ({shown}) but no data file was given",
                           "pass --data DATA.json with a value for each data variable",
                           ExitCode.DATA)
        return {}
    data = _load_data_file(data_path)
    check_data(program, data, data_path.name)
    return data


def _cmd_runtime(args: argparse.Namespace) -> ExitCode:
    if args.build or args.rebuild:
        path = runtime.build_compatible(force=args.rebuild, show_progress=True)
        print(f"compatible runtime: {path}")
    installation = runtime.resolve(args.cmdstan, build=True, show_progress=True)
    print(f"CmdStan in use: {installation.describe()}")
    print(f"  kind:    {installation.kind}")
    print(f"  version: {installation.version}")
    print(f"  path:    {installation.path}")
    print(f"  stanc:   {installation.stanc}")
    return ExitCode.OK


def _parse_model(path: Path) -> ast.Program:
    from pemc_stan.stan.parser import parse

    return parse(path.read_text(), filename=path.name)


def _cmd_transform(args: argparse.Namespace) -> ExitCode:
    from pemc_stan.methods.registry import transform

    model, _ = _model_and_data(args)
    method = _canonical_method(args.method)
    options = _method_options(args, method)
    program = _parse_model(model)
    code = transform(program, method=method, name=model.stem, **options)
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(code)
        logger.info("wrote %s", out)
    else:
        sys.stdout.write(code if code.endswith("\n") else code + "\n")
    return ExitCode.OK


def _json_safe(value: Any) -> Any:
    import numpy as np

    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return _json_safe(dataclasses.asdict(value))
    return repr(value)


def _weights_frame(fit: Any) -> Any:
    import numpy as np
    import pandas as pd

    if _method_of(fit) == "pseudo_extended":
        beta, lw = np.asarray(fit.beta()), np.asarray(fit.log_weights())
        n_chains, n_draws, n = lw.shape
        frame: dict[str, Any] = {"chain": np.repeat(np.arange(1, n_chains + 1), n_draws),
                                 "draw": np.tile(np.arange(1, n_draws + 1), n_chains)}
        for k in range(n):
            frame[f"beta_{k + 1}"] = beta[:, :, k].reshape(-1)
        for k in range(n):
            frame[f"log_weight_{k + 1}"] = lw[:, :, k].reshape(-1)
        return pd.DataFrame(frame)
    lw = np.asarray(fit.log_weights())
    n_chains, n_draws = lw.shape
    return pd.DataFrame({"chain": np.repeat(np.arange(1, n_chains + 1), n_draws),
                         "draw": np.tile(np.arange(1, n_draws + 1), n_chains),
                         "beta": np.asarray(fit.beta()).reshape(-1),
                         "delta": np.asarray(fit.delta()).reshape(-1),
                         "log_weight": lw.reshape(-1)})


def _summary_table(fit: Any, idata: Any) -> Any:
    """Weighted means with MCSE, and sd/quantiles/ESS/R-hat of the resampled draws."""
    import arviz as az
    import pandas as pd

    prog = _parse_program_text(fit.result.original_code)
    params = [n for s in (prog.parameters.stmts if prog.parameters else ())
              if isinstance(s, ast.VarDecl) for n in s.names]
    params = [p for p in params if p in idata.posterior.data_vars]
    stats = az.summary(idata, var_names=params or None, kind="all", stat_focus="mean",
                       hdi_prob=0.9)
    stats = stats.rename(columns={"mean": "resampled_mean"})
    weighted = fit.summary()
    table = pd.DataFrame(index=stats.index)
    if {"mean", "mcse"} <= set(weighted.columns):
        table["mean"] = weighted["mean"].reindex(stats.index)
        table["mcse"] = weighted["mcse"].reindex(stats.index)
    for col in ("sd", "hdi_5%", "hdi_95%", "ess_bulk", "ess_tail", "r_hat"):
        if col in stats.columns:
            table[col] = stats[col]
    return table, weighted


def _parse_program_text(text: str) -> ast.Program:
    from pemc_stan.stan.parser import parse

    return parse(text)


def _default_output_dir(model: Path, method: str) -> Path:
    short = "pe" if method == "pseudo_extended" else "ct"
    return Path.cwd() / f"{model.stem}_{short}_output"


def _quiet_cmdstanpy(debug: bool) -> None:
    """cmdstanpy's own logger: its chatter, warnings and errors only under --debug.

    (pemc-stan prints the diagnostics that matter and reports CmdStan's errors
    as cause + remedy; cmdstanpy configures its logger on first use, so this
    is done after importing it.)
    """
    import cmdstanpy.utils

    cmdstanpy.utils.get_logger().setLevel(logging.DEBUG if debug else logging.CRITICAL)


def _method_of(fit: Any) -> str:
    return str(getattr(fit, "method", None) or "pseudo_extended")


def _cmd_sample(args: argparse.Namespace) -> ExitCode:
    import pemc_stan

    _quiet_cmdstanpy(args.debug)

    model, data_path = _model_and_data(args)
    method = _canonical_method(args.method)
    options = _method_options(args, method)
    program = _parse_model(model)  # syntax errors before anything else
    data = _load_and_check_data(program, model, data_path)
    out = Path(args.output_dir) if args.output_dir else _default_output_dir(model, method)
    out.mkdir(parents=True, exist_ok=True)
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    cmdstan_kwargs: dict[str, Any] = {}
    if args.adapt_delta is not None:
        cmdstan_kwargs["adapt_delta"] = args.adapt_delta
    try:
        fit = pemc_stan.sample(str(model), data=data, method=method, chains=args.chains,
                               iter_warmup=args.iter_warmup, iter_sampling=args.iter_sampling,
                               seed=args.seed, output_dir=str(out / "cmdstan"),
                               show_progress=show_progress, **options, **cmdstan_kwargs)
    except RuntimeError as exc:
        mapped = _cmdstan_error(exc, data_path)
        if mapped is exc:
            raise
        raise mapped from exc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = fit.diagnostics(warn=False)
    from pemc_stan.output.inference_data import to_inference_data

    idata = to_inference_data(fit, output_dir=str(out / "gq"))
    nc = out / f"{model.stem}.nc"
    idata.to_netcdf(str(nc))
    weights_csv = out / "weights.csv"
    _weights_frame(fit).to_csv(weights_csv, index=False)
    table, weighted = _summary_table(fit, idata)
    log_z = None
    if "pemc_log_z" in idata.posterior.attrs:
        attrs = idata.posterior.attrs
        log_z = {"log_z": float(attrs["pemc_log_z"]),
                 "std_error": float(attrs["pemc_log_z_std_error"]),
                 "method": str(attrs["pemc_log_z_method"])}
    estimates = {
        "method": _method_of(fit),
        "model": str(model),
        "data": str(data_path) if data_path is not None else None,
        "options": json.loads(idata.posterior.attrs["pemc_options"]),
        "sampler": {"chains": args.chains, "iter_warmup": args.iter_warmup,
                    "iter_sampling": args.iter_sampling, "seed": args.seed},
        "expectations": {str(name): {k: _json_safe(row[k]) for k in weighted.columns}
                         for name, row in weighted.iterrows()},
        "log_z": log_z,
        "diagnostics": _json_safe(diagnostics),
    }
    if _method_of(fit) == "pseudo_extended":
        estimates["log_scale"] = float(fit.log_scale)
    else:
        estimates["log_zeta"] = float(fit.log_zeta)
    estimates_json = out / "estimates.json"
    estimates_json.write_text(json.dumps(estimates, indent=2) + "\n")

    import pandas as pd

    with pd.option_context("display.width", 120, "display.max_columns", 20,
                           "display.float_format", "{:.4g}".format):
        print(f"{_method_of(fit).replace('_', '-')} fit of {model.name}: {args.chains} chains x "
              f"{args.iter_sampling} draws")
        print("weighted means (mean, mcse) and resampled draws (sd, 90% interval, ESS, R-hat):")
        print(table.to_string())
    print("diagnostics:")
    for key, value in diagnostics.items():
        if key == "messages":
            continue
        if isinstance(value, float):
            value = f"{value:.4g}"
        elif isinstance(value, tuple):
            value = "(" + ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v)
                                    for v in value) + ")"
        print(f"  {key}: {value}")
    for message in diagnostics.get("messages", []):
        print(f"  advice: {message}")
    if log_z is not None:
        print(f"log Z = {log_z['log_z']:.4f} +/- {log_z['std_error']:.4f} ({log_z['method']})")
    written = [nc.name, weights_csv.name, estimates_json.name]
    written += [f"{d}/" for d in ("cmdstan", "gq") if (out / d).is_dir()]
    print(f"wrote {', '.join(written)} in {out}")
    return ExitCode.OK


def _cmd_evidence(args: argparse.Namespace) -> ExitCode:
    _quiet_cmdstanpy(args.debug)
    try:
        from pemc_stan.estimators.evidence import evidence
    except ImportError as exc:
        raise CliError(f"evidence estimation is not available in this installation ({exc})",
                       "update pemc-stan", ExitCode.UNSUPPORTED) from None
    model, data_path = _model_and_data(args)
    program = _parse_model(model)
    data = _load_and_check_data(program, model, data_path)
    kwargs: dict[str, Any] = {"chains": args.chains, "iter_warmup": args.iter_warmup,
                              "iter_sampling": args.iter_sampling, "seed": args.seed}
    if args.method is not None:
        kwargs["method"] = args.method.replace("-", "_")
    try:
        estimate = evidence(str(model), data, **kwargs)
    except RuntimeError as exc:
        mapped = _cmdstan_error(exc, data_path)
        if mapped is exc:
            raise
        raise mapped from exc
    print(f"log Z = {estimate.log_z:.6g} +/- {estimate.std_error:.3g} ({estimate.method})")
    for key, value in (estimate.diagnostics or {}).items():
        if isinstance(value, (int, float, str)):
            print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(_json_safe(
            {"log_z": estimate.log_z, "std_error": estimate.std_error,
             "method": estimate.method, "diagnostics": estimate.diagnostics}), indent=2) + "\n")
    return ExitCode.OK


# --------------------------------------------------------------------------- #
# parser
# --------------------------------------------------------------------------- #


def _add_sampler_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampler (as cmdstanpy)")
    g.add_argument("--chains", type=int, default=4, help="number of chains (default 4)")
    g.add_argument("--iter-warmup", type=int, default=1000, metavar="N",
                   help="warm-up iterations per chain (default 1000)")
    g.add_argument("--iter-sampling", type=int, default=1000, metavar="N",
                   help="sampling iterations per chain (default 1000)")
    g.add_argument("--seed", type=int, default=None, help="random seed")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pemc-stan`` with all subcommands.

    Raises
    ------
    Nothing.
    """
    parser = argparse.ArgumentParser(
        prog="pemc-stan",
        description="Pseudo-extended and continuously tempered MCMC for Stan programs.",
    )
    parser.add_argument("--version", action="version", version=f"pemc-stan {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    parser.add_argument("--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    fmt = argparse.RawDescriptionHelpFormatter

    p_transform = sub.add_parser(
        "transform", formatter_class=fmt,
        help="print the transformed Stan program (no compilation)",
        description=textwrap.fill(
            "Rewrite MODEL.stan into its pseudo-extended or continuously tempered program and "
            "print it (readable Stan; nothing is compiled).", 79),
        epilog="example: pemc-stan transform model.stan --method pe --n-pseudo 5 -o model_pe.stan")
    p_transform.add_argument("model", metavar="MODEL.stan", help=_MODEL_HELP)
    _add_method_options(p_transform, required=True)
    p_transform.add_argument("-o", "--output", metavar="OUT.stan",
                             help="write the program here instead of standard output")
    p_transform.set_defaults(handler=_cmd_transform)

    p_sample = sub.add_parser(
        "sample", formatter_class=fmt,
        help="sample with a method; write InferenceData, CSVs, weights and estimates",
        description=textwrap.fill(
            "Transform MODEL.stan, compile it (cached), run CmdStan's NUTS on the extended "
            "target (progress bars when standard error is a terminal, or with --progress), "
            "print a summary of the original parameters with R-hat/ESS and the method's "
            "diagnostics, and write the results to the output directory.", 79),
        epilog=SAMPLE_EPILOG)
    p_sample.add_argument("model", metavar="MODEL.stan", help=_MODEL_HELP)
    p_sample.add_argument("--data", metavar="DATA.json", help="data file (CmdStan JSON)")
    _add_method_options(p_sample)
    _add_sampler_options(p_sample)
    p_sample.add_argument("--adapt-delta", type=float, default=None, metavar="D",
                          help="NUTS target acceptance rate (default 0.8)")
    p_sample.add_argument("--output-dir", metavar="DIR",
                          help="output directory (default ./<model>_<pe|ct>_output)")
    p_sample.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                          help="progress bars (default: when standard error is a terminal)")
    p_sample.set_defaults(handler=_cmd_sample)

    p_evidence = sub.add_parser(
        "evidence", formatter_class=fmt,
        help="estimate the log normalising constant (log evidence) log Z",
        description=textwrap.fill(
            "Estimate log Z of MODEL.stan with DATA.json (log marginal likelihood, all "
            "constants kept), running what the estimator needs (NUTS for bridge sampling, "
            "Pathfinder for importance sampling, continuous tempering for ct/ti).", 79),
        epilog="example: pemc-stan evidence model.stan --data data.json --method bridge")
    p_evidence.add_argument("model", metavar="MODEL.stan", help=_MODEL_HELP)
    p_evidence.add_argument("--data", metavar="DATA.json", help="data file (CmdStan JSON)")
    p_evidence.add_argument("--method", default=None, metavar="METHOD",
                            help="estimator of pemc_stan.evidence: bridge (default; bridge "
                                 "sampling on NUTS draws), is (Pathfinder importance "
                                 "sampling), ct (continuous tempering, eq 20), ti "
                                 "(thermodynamic integration over CT draws)")
    _add_sampler_options(p_evidence)
    p_evidence.add_argument("--json", metavar="OUT.json", help="also write the estimate here")
    p_evidence.set_defaults(handler=_cmd_evidence)

    p_runtime = sub.add_parser(
        "runtime",
        help="show which CmdStan is used; build the compatible runtime",
        description=(
            "Print which CmdStan installation pemc-stan uses (an explicit path, $CMDSTAN, "
            "cmdstanpy's own, or the compatible runtime built from httpstan), its Stan "
            "version and its path."
        ),
    )
    p_runtime.add_argument("--cmdstan", metavar="PATH", help="use this CmdStan installation")
    p_runtime.add_argument(
        "--build", action="store_true", help="build the compatible runtime now if it is not built"
    )
    p_runtime.add_argument(
        "--rebuild", action="store_true", help="rebuild the compatible runtime from scratch"
    )
    p_runtime.set_defaults(handler=_cmd_runtime)
    return parser


# --------------------------------------------------------------------------- #
# logging, warnings and errors
# --------------------------------------------------------------------------- #


class _OncePerMessage(logging.Filter):
    """Drop log records whose message was already shown (as a warning or a record)."""

    def __init__(self, shown: set[str]) -> None:
        super().__init__()
        self.shown = shown

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self.shown:
            return False
        self.shown.add(message)
        return True


def _configure_logging(debug: bool, quiet: bool) -> None:
    level = logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    shown: set[str] = set()
    handler.addFilter(_OncePerMessage(shown))
    root = logging.getLogger("pemc_stan")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = str(message)
        if text in shown:  # the library logs what it warns
            return
        shown.add(text)
        print(f"WARNING: {text}", file=sys.stderr)

    if not debug:
        warnings.showwarning = show


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _stanc_reason(message: str) -> str:
    """The explanation stanc gives after its code excerpt, on one line."""
    parts = [p for p in re.split(r"\n\s*-{5,}\s*\n", message) if p.strip()]
    tail = parts[-1] if len(parts) > 1 else message.splitlines()[-1]
    return _one_line(tail)


def _cmdstan_error(exc: RuntimeError, data_path: Path | None) -> CliError | RuntimeError:
    """Map a cmdstanpy failure to a data error when CmdStan rejected the data."""
    text = str(exc)
    data_words = ("data initialization", "variable does not exist", "mismatch in dimension",
                  "mismatch in number", "variable name=", "but must be", "must be in the")
    if not any(w in text for w in data_words):
        return exc
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    detail = next((ln for ln in lines if ln.startswith("Exception")),
                  next((ln for ln in lines if "variable" in ln or "must be" in ln), lines[0]))
    detail = re.sub(r"^(Error|Exception):\s*", "", detail)
    detail = re.sub(r"^[\w:]*_model(_namespace)?::[\w]+:\s*", "", detail)  # C++ scope
    detail = re.sub(r"\s*\(in '[^']*', line \d+.*\)\s*$", "", detail)  # generated file
    where = data_path.name if data_path is not None else "the data"
    return CliError(f"CmdStan rejected {where}: {_one_line(detail)}",
                    f"fix the value in {where} so it satisfies the data block's declaration "
                    "(sizes and bounds)", ExitCode.DATA)


def describe_error(exc: BaseException) -> tuple[str, str, ExitCode]:
    """One line of cause, one line of remedy and the exit code for an exception.

    Raises
    ------
    Nothing.
    """
    from pemc_stan.backend.compile import StanCompileError

    if isinstance(exc, CliError):
        return exc.cause, exc.remedy, exc.code
    if isinstance(exc, FileNotFoundError):
        name = exc.filename or str(exc)
        return (f"file not found: {name}",
                f"check the path (relative paths start at {Path.cwd()})", ExitCode.MISSING_FILE)
    if isinstance(exc, (StanSyntaxError, StanSemanticError)):
        kind = "syntax" if isinstance(exc, StanSyntaxError) else "semantic"
        return (f"Stan {kind} error in {exc.filename}, line {exc.line}, column {exc.column}: "
                f"{_stanc_reason(exc.message)}",
                f"fix {exc.filename} at line {exc.line}, column {exc.column} (--debug shows "
                "stanc's full report)", ExitCode.STAN_PROGRAM)
    if isinstance(exc, UnsupportedConstructError):
        first = _one_line(exc.message.splitlines()[0]) if exc.message else type(exc).__name__
        from pemc_stan.stan.analysis import ReservedPrefixError

        if isinstance(exc, ReservedPrefixError):
            remedy = "rename the identifiers that start with 'pemc_' (the prefix is reserved)"
        else:
            remedy = ("rewrite that construct in plain Stan, or sample this model with "
                      "cmdstanpy directly")
        return f"unsupported construct: {first}", remedy, ExitCode.UNSUPPORTED
    if isinstance(exc, StanProgramError):
        return (_one_line(str(exc)), "fix the Stan program (--debug shows the details)",
                ExitCode.STAN_PROGRAM)
    if isinstance(exc, StanCompileError):
        console = [ln.strip() for ln in exc.console.splitlines() if ln.strip()]
        last = next((ln for ln in reversed(console) if "rror" in ln), console[-1] if console
                    else "")
        return (f"compiling {exc.stan_file.name} failed: {_one_line(last)}",
                "rerun with --debug to see the compiler output; check that g++ and make work",
                ExitCode.STAN_PROGRAM)
    if isinstance(exc, (runtime.CmdStanNotFoundError, runtime.RuntimeBuildError)):
        text = _one_line(str(exc))
        cause, sep, remedy = text.partition("; ")
        if not sep:
            remedy = "run 'pemc-stan runtime --build', or set CMDSTAN to a CmdStan installation"
        return cause, remedy, ExitCode.RUNTIME
    if isinstance(exc, NotImplementedError):
        text = _one_line(str(exc))
        cause, sep, remedy = text.partition("; ")
        return cause, remedy if sep else "use --method pseudo-extended", ExitCode.UNSUPPORTED
    if isinstance(exc, ValueError):
        text = _one_line(str(exc))
        return text, "see 'pemc-stan COMMAND --help' for the accepted values", ExitCode.USAGE
    if isinstance(exc, PemcStanError):
        return _one_line(str(exc)), "rerun with --debug for details", ExitCode.ERROR
    if isinstance(exc, RuntimeError):
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        return (f"CmdStan failed: {_one_line(lines[0]) if lines else type(exc).__name__}",
                "rerun with --debug to see CmdStan's output", ExitCode.RUNTIME)
    return (f"{type(exc).__name__}: {_one_line(str(exc))}",
            "rerun with --debug for the traceback and report it if it looks like a bug",
            ExitCode.ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pemc-stan`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Raises
    ------
    Nothing without ``--debug`` (errors become exit codes); with ``--debug``
    the original exception propagates.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help / usage errors
        return int(exc.code or 0) if exc.code in (0, None) else int(ExitCode.USAGE)
    _configure_logging(args.debug, args.quiet)
    handler: Callable[[argparse.Namespace], ExitCode] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return int(ExitCode.USAGE)
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        print("pemc-stan: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - every error becomes cause + remedy
        if args.debug:
            raise
        cause, remedy, code = describe_error(exc)
        print(f"pemc-stan: error: {cause}", file=sys.stderr)
        print(f"pemc-stan: remedy: {remedy}", file=sys.stderr)
        return int(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
