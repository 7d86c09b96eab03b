"""One fit's chains as separate Dask tasks, merged into one cmdstanpy fit.

CmdStan seeds chain ``c`` of a run with ``(seed, c)`` alone, whether it runs
with the other chains in one process or by itself (``chain_ids=[c]``), so a
chain computed on any worker is the chain of the same fit run in one process:
draws, adaptation and every estimate are identical whatever the number of
workers.  Workers compile the transformed program from its text into their
own content-hash cache (no shared file system is assumed; a worker compiles a
program once).  Each chain's CSV comes back to the client, which writes the
files into the run's output folder and reads them with
``cmdstanpy.from_csv``; pilots (Pathfinder) and post-processing run on the
client as before.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cmdstanpy

from pemc_stan.errors import CmdStanRunError

logger = logging.getLogger(__name__)

__all__ = ["DaskChainRunner", "run_chain"]


def run_chain(stan_code: str, name: str, data: Mapping[str, Any], chain_id: int, seed: int,
              iter_warmup: int, iter_sampling: int, kwargs: Mapping[str, Any]
              ) -> dict[str, Any]:
    """Compile (cached) and run one chain; runs on a worker.

    Returns
    -------
    dict
        ``{"csv": bytes, "name": file name}``, or ``{"error": message,
        "reason": CmdStan's lines}`` when CmdStan failed (returned, not raised,
        so that a failing chain is not retried on other workers).

    Raises
    ------
    StanCompileError
        If the program does not compile on the worker.
    """
    from pemc_stan.backend.compile import compile_model
    from pemc_stan.backend.console import (
        is_cmdstan_failure,
        routed_cmdstanpy_logging,
        run_error,
    )

    model = compile_model(stan_code, name=name)
    options = dict(kwargs)
    options.setdefault("sig_figs", 12)
    # the worker's cmdstanpy chatter is debug logging there; the client tells CmdStan's
    # reasons in the user's lines (it has the line map)
    with tempfile.TemporaryDirectory(prefix="pemc_chain_") as tmp, routed_cmdstanpy_logging():
        try:
            fit = model.sample(data=dict(data), chains=1, chain_ids=[chain_id], seed=seed,
                               iter_warmup=iter_warmup, iter_sampling=iter_sampling,
                               output_dir=tmp, show_progress=False, **options)
        except RuntimeError as exc:
            if not is_cmdstan_failure(exc):
                raise
            err = run_error(exc, f"sampling (chain {chain_id})")
            return {"error": str(err), "reason": err.reason}
        csv = Path(fit.runset.csv_files[0])
        return {"csv": csv.read_bytes(), "name": f"{name}_{chain_id}.csv"}


_TEMPORARY: list[str] = []
#: ``CmdStanModel.sample`` arguments that take one entry per chain as a list (a list of
#: step sizes is left out: CmdStan running the chains in one process takes the first).
_PER_CHAIN = ("inits", "inv_metric")


def _remove_temporary() -> None:
    for path in _TEMPORARY:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_remove_temporary)


class DaskChainRunner:
    """Runs :meth:`~pemc_stan.sampling.model.MethodModel.run_nuts` with one task per chain.

    Parameters
    ----------
    client
        A ``distributed.Client``.
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def __call__(self, stan_code: str, name: str, data: Mapping[str, Any], chains: int,
                 iter_warmup: int, iter_sampling: int, seed: int,
                 output_dir: str | os.PathLike[str] | None,
                 **cmdstanpy_kwargs: Any) -> cmdstanpy.CmdStanMCMC:
        """Run ``chains`` chains (ids 1..chains, one seed) as tasks; merge them.

        Raises
        ------
        CmdStanRunError
            If CmdStan fails for a chain (its reason as CmdStan gave it).
        OptionsError
            For ``chain_ids`` (chains are numbered 1..chains here).
        """
        from pemc_stan.errors import OptionsError

        if "chain_ids" in cmdstanpy_kwargs:
            raise OptionsError("chain_ids", cmdstanpy_kwargs["chain_ids"],
                               "no chain_ids with client= (chains are numbered 1..chains)")
        kwargs = {k: v for k, v in cmdstanpy_kwargs.items()
                  if k not in ("parallel_chains", "show_console")}
        # one future holding the whole dict (scattering a dict would name a future after
        # every key, and the next call's values would collide with those names)
        [payload] = self.client.scatter([dict(data)], hash=False)

        def chain_kwargs(c: int) -> dict[str, Any]:
            # a per-chain list (as cmdstanpy takes inits and inverse metrics)
            # gives each chain its own entry
            return {k: v[c - 1] if k in _PER_CHAIN and isinstance(v, list) and len(v) == chains
                    else v for k, v in kwargs.items()}

        futures = [self.client.submit(run_chain, stan_code, name, payload, c, seed,
                                      iter_warmup, iter_sampling, chain_kwargs(c), pure=False,
                                      key=f"pemc-chain-{name}-{seed}-{c}-{os.urandom(4).hex()}")
                   for c in range(1, chains + 1)]
        results = self.client.gather(futures)
        if output_dir is None:
            folder = tempfile.mkdtemp(prefix="pemc_chains_")
            _TEMPORARY.append(folder)
        else:
            folder = str(output_dir)
            os.makedirs(folder, exist_ok=True)
        for result in results:
            if "error" in result:
                raise CmdStanRunError(result["error"], result["reason"])
        paths = []
        for result in results:
            path = Path(folder) / result["name"]
            path.write_bytes(result["csv"])
            paths.append(str(path))
        logger.info("merged %d chains of %s computed on the cluster into %s", chains, name,
                    folder)
        fit = cmdstanpy.from_csv(paths, method="sample")
        if not isinstance(fit, cmdstanpy.CmdStanMCMC):  # pragma: no cover - from_csv contract
            raise TypeError(f"the chains' CSV files did not read as a sampling run: {paths}")
        return fit
