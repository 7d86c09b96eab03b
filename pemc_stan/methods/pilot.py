"""Pilot fits on the original model: a Gaussian base density and an estimate of ``log Z``.

Continuous tempering needs a normalised base density ``b`` and ``log zeta``
(Graham & Storkey 2017, section 6); pseudo-extended sampling tempered towards a
base needs the same two things (its offset ``log Z^``).  :class:`BasePilot`
fits them with fallbacks, so that a pilot never stops a model NUTS can run:

1. multi-path Pathfinder (no PSIS resampling): paths are grouped by mode
   (:func:`pemc_stan.backend.pathfinder.group_paths`), each mode's draws
   moment-matched and the modes combined as the moment-matched mixture of
   eq 25, weighted by their importance-sampling masses; ``log Z`` is the sum of
   the modes' importance-sampling masses;
2. when it fails (or another first method is asked for), ADVI (mean-field),
   Laplace at the mode, then a short plain-NUTS run (which works wherever
   NUTS does) give the base; ``log Z`` is then estimated by importance
   sampling from the base with every constant of the density (CmdStan's
   ``log_p__`` of these methods drops them).

Every failure is recorded in :attr:`BasePilot.notes` as ``(name, message,
remedy)``, which the fits show in their diagnostics.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from scipy.special import logsumexp

from pemc_stan.backend.pathfinder import (
    ModeGroup,
    group_paths,
    log_importance_weights,
    mode_centres,
)
from pemc_stan.methods.base_density import (
    BaseCoordinates,
    BaseDensity,
    extract_variable,
    moment_match,
)

logger = logging.getLogger(__name__)

__all__ = ["APPROXIMATIONS", "BasePilot", "log_z_from_importance_weights"]

#: The approximations tried, in order, after Pathfinder.
APPROXIMATIONS = ("advi", "laplace", "nuts")


def log_z_from_importance_weights(log_weights: np.ndarray) -> float:
    """``log mean exp(log_weights)`` over the finite weights (``-inf`` weights count as 0).

    Raises
    ------
    ValueError
        If no weight is finite.
    """
    lw = np.asarray(log_weights, dtype=float).reshape(-1)
    lw = np.where(np.isnan(lw), -np.inf, lw)
    if not np.isfinite(lw).any():
        raise ValueError("no finite importance weight: the approximation puts no mass where "
                         "the density is positive")
    return float(logsumexp(lw) - np.log(lw.size))


class BasePilot:
    """Base density and ``log Z`` from approximations of the original model.

    Parameters
    ----------
    owner
        The method's model (:class:`~pemc_stan.methods.base.MethodModel`): its
        ``original_model()``, ``data``, ``program`` and ``name`` are used.
    coordinates
        The base coordinate map of the parameters (empty: group Pathfinder's
        paths by the raw parameter columns; no base can be fitted).
    num_paths, draws
        Pathfinder paths, and draws per path (in total for ADVI and Laplace).
    covariance
        ``"dense"`` or ``"diag"``: the base's covariance form.
    """

    def __init__(self, owner: Any, coordinates: BaseCoordinates, *, num_paths: int,
                 draws: int, covariance: str) -> None:
        self.owner = owner
        self.coordinates = coordinates
        self.num_paths = int(num_paths)
        self.draws = int(draws)
        self.covariance = covariance
        #: ``(name, message, remedy)`` of the pilots that failed in the last :meth:`fit`.
        self.notes: list[tuple[str, str, str]] = []
        #: Means (K, D) in base coordinates of the distinct modes Pathfinder found
        #: (None for fewer than two, or when the base did not come from Pathfinder).
        self.mode_centres: Any = None

    # ------------------------------------------------------------------ approximations

    def param_draws(self, values: np.ndarray, columns: list[str]) -> dict[str, np.ndarray]:
        """The parameters' draws by name, shaped as declared, from CmdStan columns."""
        env = self.coordinates.env(self.owner.data)
        return {b.name: extract_variable(values, columns, b.name, (*arr, *el))
                for b in self.coordinates.blocks
                for arr, el in [b.shape(env)]}

    def pathfinder(self, seed: int | None) -> tuple[list[ModeGroup], float, Any, Any]:
        """Multi-path Pathfinder on the original model: (modes, log Z, draws in base
        coordinates (raw parameter columns without coordinates), the modes'
        centres in the same coordinates, :func:`mode_centres`)."""
        owner = self.owner
        pf = owner.original_model().pathfinder(
            data=owner.data or None, seed=seed, num_paths=self.num_paths, draws=self.draws,
            psis_resample=False, show_console=False)
        cols = list(pf.column_names)
        arr = np.asarray(pf.draws(), dtype=float)
        lw = log_importance_weights(arr, cols)
        if self.coordinates.blocks:
            z, _ = self.coordinates.forward(self.param_draws(arr, cols), owner.data)
        else:  # group by the raw parameter columns
            z = arr[:, [i for i, c in enumerate(cols) if not c.endswith("__")]]
        groups, log_z = group_paths(z, lw, self.num_paths, min_draws=2)
        return groups, log_z, z, mode_centres(z, lw, groups, self.num_paths)

    def approximation(self, how: str, seed: int | None) -> Any:
        """Draws in base coordinates of an approximation of the posterior (``how``:
        ``"advi"``, ``"laplace"`` or ``"nuts"``, a short plain-NUTS pilot)."""
        model, data = self.owner.original_model(), self.owner.data or None
        fit: Any
        if how == "advi":
            fit = model.variational(data=data, seed=seed, draws=self.draws,
                                    algorithm="meanfield", show_console=False,
                                    require_converged=False)
            arr = np.asarray(fit.variational_sample, dtype=float)
        elif how == "laplace":
            # the mode is written with 12 significant digits: CmdStan re-reads it and
            # checks simplexes / correlation matrices to 1e-8
            mode = model.optimize(data=data, seed=seed, jacobian=True, sig_figs=12,
                                  show_console=False)
            fit = model.laplace_sample(data=data, mode=mode, seed=seed, draws=self.draws,
                                       sig_figs=12)
            arr = np.asarray(fit.draws(), dtype=float)
        else:
            fit = model.sample(data=data, seed=seed, chains=2, iter_warmup=500,
                               iter_sampling=max(self.draws // 2, 100), show_progress=False,
                               show_console=False)
            arr = np.asarray(fit.draws(concat_chains=True), dtype=float)
        z, _ = self.coordinates.forward(self.param_draws(arr, list(fit.column_names)),
                                        self.owner.data)
        return z

    def importance_log_z(self, base: BaseDensity, seed: int | None, n: int = 2000) -> float:
        """``log Z`` by importance sampling from the base, ``log gamma`` evaluated with every
        constant by the density program."""
        from pemc_stan.methods.density import DensityEvaluator

        coords, data = self.coordinates, self.owner.data
        z = base.sample_z(n, np.random.default_rng(seed))
        draws = coords.inverse(z, data)
        log_b = base.log_density(coords, draws, data)
        log_gamma = DensityEvaluator(self.owner.program, data, self.owner.name).log_density(draws)
        return log_z_from_importance_weights(np.where(np.isnan(log_gamma), -np.inf,
                                                      log_gamma) - log_b)

    # ------------------------------------------------------------------ the pilot

    def fit(self, seed: int | None, *, want_base: bool, first: str = "pathfinder",
            base: BaseDensity | None = None, log_z: float | None = None,
            pathfinder: bool = True) -> tuple[BaseDensity | None, float | None]:
        """Fit what is missing: the base (when ``want_base``) and ``log Z`` (when None).

        Parameters
        ----------
        seed
            Seed of every pilot.
        want_base
            Fit a base density (else keep ``base``, which may be None).
        first
            The first approximation of the base: ``"pathfinder"``, ``"advi"``,
            ``"laplace"`` or ``"nuts"``; the others follow on failure.
        base, log_z
            Given values (kept).
        pathfinder
            False when Pathfinder is known to fail (it is not tried again).

        Returns
        -------
        (BaseDensity or None, float or None)
            ``log Z`` is None only when no base exists and Pathfinder failed.

        Raises
        ------
        RuntimeError
            If a base is wanted and every approximation fails (then NUTS itself
            cannot run the model).
        """
        self.notes = []
        self.mode_centres = None
        if first == "pathfinder" and not pathfinder:
            first = APPROXIMATIONS[0]
        if pathfinder and (log_z is None or (want_base and first == "pathfinder")):
            try:
                groups, pf_log_z, z, centres = self.pathfinder(seed)
                if log_z is None:
                    log_z = pf_log_z
                if want_base and first == "pathfinder":
                    base = moment_match(z, None, groups, self.covariance)
                    base.info.update({"method": "pathfinder", "modes": len(groups)})
                    if len(groups) > 1:
                        self.mode_centres = centres
            except Exception as exc:
                self._note("pathfinder", exc)
        if want_base and base is None:
            order = [first] if first != "pathfinder" else []
            order += [m for m in APPROXIMATIONS if m not in order]
            for how in order:
                try:
                    base = moment_match(self.approximation(how, seed), None, None,
                                        self.covariance)
                    base.info.update({"method": how})
                    break
                except Exception as exc:
                    self._note(how, exc)
            if base is None:
                raise RuntimeError(
                    f"no base density could be fitted for {self.owner.name}: "
                    + "; ".join(n[1] for n in self.notes)
                    + "; pass a BaseDensity as base=")
        if log_z is None and base is not None:
            log_z = self.importance_log_z(base, seed)
        return base, (None if log_z is None else float(log_z))

    def _note(self, how: str, exc: BaseException) -> None:
        reason = " ".join(str(exc).split())[:240] or type(exc).__name__
        logger.warning("the %s fit of the base density failed (%s); trying the next one", how,
                       reason)
        self.notes.append((f"{how}_failed", f"the {how} fit of the base failed ({reason})",
                           "nothing to do when the next approximation worked"))
