"""Options of continuous tempering (Graham & Storkey 2017): the base density and log zeta."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.options import (
    BETA_MARGINALS,
    MARGINALISE_CHOICES,
    REPARAMETERIZE_CHOICES,
    SPLIT_MODES_CHOICES,
    MethodOptions,
    beta_marginal_option,
    check_choice,
    check_int,
    check_number,
    first_round_size,
    marginalise_option,
    option,
    reparameterize_option,
    split_modes_option,
)
from pemc_stan.errors import OptionsError

__all__ = ["ContinuousTemperingOptions", "BASE_METHODS", "COVARIANCES",
           "TEMPER_CHOICES"]

#: What can be tempered.
TEMPER_CHOICES = ("posterior", "likelihood")
#: Covariance forms of the Gaussian base ("auto": dense, or a given base's own form).
COVARIANCES = ("auto", "dense", "diag")

#: Ways of fitting the initial base density and log zeta (section 6).
BASE_METHODS = ("pathfinder", "advi", "laplace")



@dataclass
class ContinuousTemperingOptions(MethodOptions):
    """Settings of continuous tempering.

    Attributes
    ----------
    temper
        ``"posterior"`` (bridge ``b`` to ``gamma``, the paper's eq 15) or
        ``"likelihood"`` (the family ``prior * likelihood^beta``; the base is
        the prior).
    base
        How the initial Gaussian base and ``log zeta`` are fitted on the
        ORIGINAL model: ``"pathfinder"`` (multi-path; the paths' Gaussians are
        combined as the mixture of eq 25, weighted by their importance-sampling
        mass estimates, and moment-matched), ``"advi"`` (mean-field ADVI
        draws) or ``"laplace"`` (draws of the Laplace approximation at the
        mode); or a fixed :class:`~pemc_stan.core.base_density.BaseDensity`.
    base_df
        Degrees of freedom of the base's tails: ``inf`` for a Gaussian base, else a
        Student-t with the fitted location and scale (its heavier tails reach the parts of
        a mode a Gaussian fitted to the pilot's draws leaves out, such as a banana's arms).
    base_covariance
        ``"dense"`` (one multivariate normal over all base coordinates, with
        the correlations the pilot measured), ``"diag"`` (independent
        coordinates) or ``"auto"`` (the default: the given ``BaseDensity``'s
        own form, else dense).  The base is meant to be the moment-matched
        Gaussian of the target (section 6); a diagonal one drops the
        correlations of e.g. a regression with uncentred predictors, so the
        two ends of the bridge differ in shape and the chains stall between
        them.  Dense costs O(D^2) per density evaluation; with
        fewer than ``4 D`` pilot draws only the variances are estimated.
    log_zeta
        ``log zeta``; None means "estimate" (importance sampling on the base
        fit's draws, then the bootstrap).
    bootstrap_rounds
        Number of extra CT runs of the section-6 bootstrap: after each run,
        the base is re-fitted to the eq-21 weighted moments of the target in
        base coordinates and ``log zeta`` set to the eq-20 estimate.  0 runs
        CT once.
    bootstrap_sampling
        Draws per chain of round 0 when bootstrap rounds follow it (every later
        round draws ``iter_sampling``).  Round 0 runs with the pilot's base and
        ``log zeta``; its draws serve only to re-fit them and the beta bias, and
        none of its draws reaches the fit's estimates.  Those need less precision
        than the final estimates: an error ``e`` in ``log zeta`` moves the next
        round's time between the two ends of the bridge by a factor ``exp(e)``, so
        a standard error of tenths of a nat is enough, and the re-fitted base's
        covariance is kept dense only with at least ``4 D`` effective draws
        (:func:`~pemc_stan.core.base_density.moment_match`).  The length bias
        (``beta_marginal="length"``) is importance-weighted from round 0's draws
        pooled with as many iid draws of the next base, which represent the next
        bridge's ``beta = 0`` end (few of round 0's own draws are near
        ``beta = 0``).  None (the default) draws
        ``iter_sampling // 4``, at least 250 and at most ``iter_sampling``: round 0's
        sampling is then about a twentieth of a default CT run's time instead of
        a fifth.
    bootstrap_warmup
        Warm-up iterations of round 0 when bootstrap rounds follow it (every
        later round warms up ``iter_warmup``).  Round 0's warm-up can be most of
        round 0's time (the early adaptation windows run with the unit metric), and
        its adaptation only has to be good enough for ``bootstrap_sampling`` draws
        that re-fit the base, ``log zeta`` and the beta bias.  None (the default)
        warms up ``iter_warmup // 2``, at least 150 (CmdStan's first buffer, one
        metric window and its last buffer) and at most ``iter_warmup``: half saves
        time without a less precise ``log Z``, while a quarter can leave round 0
        in a region where the density is explosive (docs/decisions.md).
    bootstrap_tol
        The bootstrap stops early when ``|log Z_r - log Z_{r-1}| <=
        bootstrap_tol * sqrt(se_r^2 + se_{r-1}^2)``.
    num_paths
        Pathfinder paths for ``base="pathfinder"``.  Each path starts at its
        own random point, so the paths are the pilot's independent searches
        for modes, and CT's base covers only the modes they find (a chain
        cannot reach a mode the base gives no mass).  A mode whose basin of
        attraction holds a share ``q`` of the starting region is missed by
        every path with probability ``(1 - q)^num_paths``: for two equal
        basins 12.5% with 4 paths and 0.8% with 8.  This is the number of
        paths of the search's first round; its later rounds start at wider
        radii and run up to 16 times as many in all
        (:meth:`~pemc_stan.modes.pilot.BasePilot.pathfinder`).
    base_draws
        Draws per path (Pathfinder) or in total (ADVI, Laplace) for the fit.
    beta_marginal
        How each bootstrap round divides the chains' time between
        temperatures.  ``"flat"``: the paper's joint, whose beta-marginal is
        flat when ``zeta = Z`` and the base matches the target (eq 23).
        ``"length"`` (the default): after each round a bias ``g(beta)``
        (:func:`~pemc_stan.methods.tempering.length_bias`)
        spreads half of the time evenly along the bridge's thermodynamic
        length and half evenly in beta.  Between modes a barrier of height
        ``H`` shrinks to ``beta H``, so the chains change mode only at ``beta``
        below about ``1 / H``; the length puts time there, where the tempered
        densities change fastest.  The estimators account for ``g`` exactly.
    reparameterize
        ``"auto"`` (the default) declares each parameter whose only density is
        a normal prior with a parameter-dependent scale with that location and
        scale as offset and multiplier (Stan's non-centred parameterisation,
        :mod:`pemc_stan.stan.reparameterize`; the base density then lives in
        those coordinates); ``"none"`` keeps the declarations as written.
    marginalise
        ``"auto"`` (the default): a change point (a parameter used only in comparisons)
        is summed out and drawn back (:mod:`pemc_stan.core.marginalise`); ``"none"``.
    split_modes
        ``"auto"`` (the default): when the pilot's search found the modes and NUTS
        chains started at each stay in their mode's cell, the modes are sampled by
        those chains and weighted by bridge-sampled masses, and the method's own
        sampler is not run (:mod:`pemc_stan.modes.split`; the fit is a
        :class:`~pemc_stan.modes.split_fit.ModeSplitFit`); ``"never"``: always run
        the method.
    """

    temper: str = option("posterior", "temper the whole density or only the likelihood",
                         choices=TEMPER_CHOICES)
    base: Any = option("pathfinder", "how the base density is fitted", choices=BASE_METHODS)
    base_covariance: str = option("auto", "covariance of the base density (auto: dense, or a "
                                  "given base's own form)",
                                  choices=COVARIANCES)
    base_df: float = option(math.inf, "degrees of freedom of the base's Student-t tails "
                            "(inf: a Gaussian base)", parse=float, metavar="NU")
    log_zeta: float | None = option(None, "fixed log zeta (default: estimated)", parse=float,
                                    metavar="X")
    bootstrap_rounds: int = option(1, "rounds of the section-6 bootstrap of base and log zeta",
                                   metavar="R")
    bootstrap_sampling: int | None = option(
        None, "draws per chain of round 0, whose draws only re-fit the base, log zeta and "
        "the beta bias when bootstrap rounds follow (default: a quarter of iter_sampling, "
        "at least 250)", parse=int, metavar="N")
    bootstrap_warmup: int | None = option(
        None, "warm-up iterations of round 0 when bootstrap rounds follow (default: half "
        "of iter_warmup, at least 150)", parse=int, metavar="N")
    bootstrap_tol: float = option(1.0, "the bootstrap stops when log Z moves by less than this "
                                  "many combined standard errors", metavar="T")
    num_paths: int = option(8, "Pathfinder paths of the base fit (independent searches "
                            "for modes)", metavar="P")
    base_draws: int = option(1000, "draws per path (Pathfinder) or in total (ADVI, Laplace) "
                             "of the base fit", metavar="D")
    beta_marginal: str = beta_marginal_option(
        "how bootstrap rounds spread time over temperatures (length: evenly along the "
        "bridge's thermodynamic length and in beta; flat: the paper's joint)")
    reparameterize: str = reparameterize_option()
    marginalise: str = marginalise_option()
    split_modes: str = split_modes_option()

    def validate(self) -> ContinuousTemperingOptions:
        """Check the options.

        Returns
        -------
        ContinuousTemperingOptions
            ``self``, for chaining.

        Raises
        ------
        OptionsError
            Naming the argument, the value and what was expected.
        """
        check_choice("temper", self.temper, TEMPER_CHOICES)
        check_choice("reparameterize", self.reparameterize, REPARAMETERIZE_CHOICES)
        check_choice("marginalise", self.marginalise, MARGINALISE_CHOICES)
        check_choice("split_modes", self.split_modes, SPLIT_MODES_CHOICES)
        if isinstance(self.base, BaseDensity):
            self.base.validate()
            if self.temper == "likelihood":
                raise OptionsError(
                    "base", self.base, "'pathfinder' with temper='likelihood'",
                    message="base is a BaseDensity but temper='likelihood' uses the prior as "
                            "base; pass base='pathfinder' (only log zeta is fitted) or "
                            "temper='posterior'")
        elif self.base not in BASE_METHODS:
            raise OptionsError("base", self.base, f"one of {BASE_METHODS} or a BaseDensity")
        check_choice("base_covariance", self.base_covariance, COVARIANCES)
        check_choice("beta_marginal", self.beta_marginal, BETA_MARGINALS)
        if isinstance(self.base, BaseDensity) and self.base.covariance != self.covariance_form:
            raise OptionsError(
                "base_covariance", self.base_covariance, "the base's own covariance form",
                message=f"base has covariance={self.base.covariance!r} but "
                        f"base_covariance={self.base_covariance!r}; make them agree")
        if self.base_df != math.inf:
            check_number("base_df", self.base_df, 2.0, low_open=True,
                         expected="more than 2 (a finite covariance), or inf (a Gaussian base)")
        if self.log_zeta is not None:
            check_number("log_zeta", self.log_zeta,
                         expected="a finite number or None (estimate it)")
        for arg, low in (("bootstrap_rounds", 0), ("num_paths", 1), ("base_draws", 10)):
            check_int(arg, getattr(self, arg), low)
        if self.bootstrap_sampling is not None:
            check_int("bootstrap_sampling", self.bootstrap_sampling, 1)
        if self.bootstrap_warmup is not None:
            check_int("bootstrap_warmup", self.bootstrap_warmup, 1)
        check_number("bootstrap_tol", self.bootstrap_tol, 0.0, low_open=True,
                     expected="a number > 0 (in standard errors)")
        return self

    def round_sampling(self, r: int, iter_sampling: int) -> int:
        """Draws per chain of round ``r`` of a run asked for ``iter_sampling`` draws.

        Round 0 draws ``bootstrap_sampling`` when a bootstrap round follows it
        (default: ``iter_sampling // 4``, at least 250, at most ``iter_sampling``);
        every other round draws ``iter_sampling``.

        Raises
        ------
        Nothing.
        """
        return self._round_zero(r, iter_sampling, self.bootstrap_sampling, 4, 250)

    def round_warmup(self, r: int, iter_warmup: int) -> int:
        """Warm-up iterations of round ``r`` of a run asked for ``iter_warmup``.

        Round 0 warms up ``bootstrap_warmup`` when a bootstrap round follows it
        (default: ``iter_warmup // 2``, at least 150, at most ``iter_warmup``);
        every other round warms up ``iter_warmup``.

        Raises
        ------
        Nothing.
        """
        return self._round_zero(r, iter_warmup, self.bootstrap_warmup, 2, 150)

    def _round_zero(self, r: int, asked: int, given: int | None, divisor: int,
                    least: int) -> int:
        """``asked``, except in round 0 when a bootstrap round follows it: ``given``, or
        ``asked // divisor``, at least ``least`` and at most ``asked``."""
        if r > 0 or self.bootstrap_rounds == 0:
            return asked
        if given is not None:
            return int(given)
        return first_round_size(asked, divisor, least)

    @property
    def covariance_form(self) -> str:
        """The base's covariance form: ``base_covariance``, with ``"auto"`` resolved."""
        if self.base_covariance != "auto":
            return str(self.base_covariance)
        return self.base.covariance if isinstance(self.base, BaseDensity) else "dense"
