"""Options of pseudo-extended MCMC (Nemeth et al. 2019): N, the beta densities, tempering."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pemc_stan.core.options import (
    BETA_MARGINALS,
    MARGINALISE_CHOICES,
    REPARAMETERIZE_CHOICES,
    SPLIT_MODES_CHOICES,
    MethodOptions,
    beta_marginal_option,
    check_choice,
    marginalise_option,
    option,
    reparameterize_option,
    split_modes_option,
)
from pemc_stan.errors import OptionsError

__all__ = ["AUTO", "AUTO_BETA_MIN", "BetaDensity", "PseudoExtendedOptions", "as_beta", "is_auto",
           "parse_beta_density",
           "parse_ladder", "stan_number", "TEMPER_CHOICES"]

#: What can be tempered ("auto": the likelihood when every parameter has a proper prior,
#: else the whole posterior towards a base density).
TEMPER_CHOICES = ("auto", "posterior", "likelihood", "base")
#: The default of ``beta_prior`` and ``instrumental``: chosen so that the target is proper.
AUTO = "auto"


#: ``beta_min`` under whole-posterior tempering by default: hot pseudo-samples then reach
#: ``s / sqrt(0.01) = 10 s`` around a mode of width ``s``, enough to meet modes 10-20 sd away.
AUTO_BETA_MIN = 0.01


def is_auto(value: Any) -> bool:
    """True for the value ``"auto"`` of ``temper``, ``beta_prior`` or ``instrumental``."""
    return isinstance(value, str) and value == AUTO


def parse_beta_density(text: str) -> Any:
    """Command-line form of a Beta density: ``uniform`` or ``A,B``.

    Raises
    ------
    argparse.ArgumentTypeError
        For anything else.
    """
    if text.strip().lower() in ("uniform", AUTO):
        return text.strip().lower()
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not 'auto', 'uniform' or 'A,B' (Beta shape parameters, e.g. 2,2)"
        ) from None
    return (a, b)


def parse_ladder(text: str) -> Any:
    """Command-line form of ``beta``: ``estimate`` or a comma-separated ladder.

    Raises
    ------
    argparse.ArgumentTypeError
        For anything else.
    """
    if text.strip().lower() == "estimate":
        return "estimate"
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not 'estimate' or a comma-separated ladder such as 0.1,0.5,1") from None


@dataclass(frozen=True)
class BetaDensity:
    """A Beta(a, b) density on (0, 1) for ``pi(beta)`` or ``g(beta)``; Beta(1, 1) is uniform."""

    a: float = 1.0
    b: float = 1.0

    @property
    def is_uniform(self) -> bool:
        """True for Beta(1, 1)."""
        return self.a == 1.0 and self.b == 1.0

    def stan(self, arg: str) -> str:
        """Stan expression of the log density at ``arg`` (``""`` when uniform)."""
        if self.is_uniform:
            return ""
        return f"beta_lpdf({arg} | {stan_number(self.a)}, {stan_number(self.b)})"


def stan_number(x: float) -> str:
    text = repr(float(x))
    return text if ("." in text or "e" in text) else text + ".0"


def as_beta(value: Any, argument: str) -> BetaDensity:
    if value is None or value == "uniform":
        return BetaDensity()
    if isinstance(value, BetaDensity):
        out = value
    elif isinstance(value, (tuple, list)) and len(value) == 3 and value[0] == "beta":
        out = BetaDensity(float(value[1]), float(value[2]))
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        out = BetaDensity(float(value[0]), float(value[1]))
    else:
        raise OptionsError(argument, value, "'uniform', a BetaDensity, (a, b) or ('beta', a, "
                           "b) with a, b > 0", message=f"{argument}={value!r} is not "
                           "understood; expected 'uniform', a BetaDensity, (a, b) or "
                           "('beta', a, b) with a, b > 0")
    if not (math.isfinite(out.a) and math.isfinite(out.b) and out.a > 0 and out.b > 0):
        raise OptionsError(argument, value, "finite Beta shape parameters > 0",
                           message=f"{argument}={value!r}: Beta shape parameters must be "
                           "finite and > 0")
    return out


@dataclass
class PseudoExtendedOptions(MethodOptions):
    """Settings of the pseudo-extended transformation.

    Attributes
    ----------
    n_pseudo
        Number of pseudo-samples ``N >= 1``; default 3.  The paper finds
        ``2 <= N <= 5`` best for the cost (sections 4.1-4.2).  Within that range
        ``N = 2`` is the weakest between separated modes: with one hot and one
        cold copy, a mode change needs the hot copy to land in the other mode
        and cool while the resampling weight passes to it.  ``N = 3`` is the
        fewest that moves reliably between separated modes; more copies lower the
        error further for proportionally more gradients (docs/decisions.md).
    beta
        ``"estimate"`` (sample ``beta_i`` with prior ``pi`` and instrumental
        ``g``) or a fixed ladder: a sequence of ``N`` values in (0, 1].
    temper
        ``"posterior"`` (eq 7, temper the whole density), ``"likelihood"``
        (temper only the likelihood; the prior enters fully), ``"base"``
        (``q(x, beta) ∝ b(x)^(1 - beta) gamma~(x)^beta``: temper the whole
        density towards a normalised Gaussian base ``b`` in the parameters'
        base coordinates, fitted by a Pathfinder pilot with fallbacks) or
        ``"auto"`` (the default): ``"base"`` when a parameter has a flat
        (improper) prior, where ``gamma^beta`` need not be integrable for small
        ``beta`` (for a regression with flat priors on ``n`` observations and
        ``d`` coefficients it is not for ``beta < (d + 1)/n``), while ``int
        b^(1 - beta) gamma~^beta <= Z~^beta`` by Hölder's inequality: proper by
        construction for every model; ``"base"`` too when the model has
        likelihood terms (the pilot's base is a shorter bridge to the target than
        the prior, which can be many nats away; ``"likelihood"``, ``Z~(beta) = int p
        L~^beta <= Z~^beta``, remains an option); and ``"posterior"`` with the
        ``"auto"`` instrumental below for a density with no likelihood split (a
        mixture written as one ``target +=``): its hot
        pseudo-samples roam the flattened density, beyond the modes a pilot
        found, where a base fitted by Pathfinder would keep them near the modes
        it found (Pathfinder's paths start near the origin and can miss far
        modes, which a base would then hide behind an ok verdict), unless the
        density has a hierarchical normal prior (non-centred by
        ``reparameterize``): ``gamma^beta`` then pushes the hot pseudo-samples'
        scale parameter far up into a funnel where NUTS diverges, so ``"base"``;
        likewise when a prior is heavy-tailed (a Cauchy prior's ``gamma^beta``
        is not integrable for ``beta <= 1/2``).  When the
        parameters have no base density (``unit_vector``, correlation
        matrices, bounds that depend on container parameters), ``"posterior"``
        replaces ``"base"``.
    beta_prior
        ``pi(beta)``: ``"auto"`` (the default: ``pi = g``, so the weight is
        ``gamma~(x_i)^(1 - beta_i)``), ``"uniform"``, ``(a, b)`` or
        ``BetaDensity`` (Beta(a, b)).
        It is the law of ``beta_i`` of the pseudo-sample that carries the
        weight (whose ``x_i`` follows the target); choosing ``pi = g`` makes
        the weight ``gamma~(x_i)^(1 - beta_i)`` and, with ``g = (a, 1)``,
        ``a < 1``, keeps that pseudo-sample often hot, so it leaves its mode
        soon after another one takes the weight over.
    instrumental
        ``g(beta)`` on (0, 1), same forms as ``beta_prior``.  ``"auto"`` (the
        default): uniform under likelihood tempering; under whole-posterior
        tempering ``Beta((d + 1)/2, 1)`` with ``d`` the number of unconstrained
        parameters (computed from the data), because ``Z~(beta)`` grows like
        ``beta^(-d/2)`` as ``beta -> 0`` for a target with Gaussian tails: then
        ``Z~(beta) g(beta)`` behaves like ``beta^(-1/2)``, integrable in every
        dimension (the instrumental is proper) and leaning to small ``beta`` as a
        uniform ``g`` does in one dimension (uniform for ``d = 1``), instead of
        drifting to 0.  (``Beta(1 + d/2, 1)``, a flat marginal, left the hot
        pseudo-samples too little time at small ``beta``.)  ``(a, 1)`` with
        ``a < 1`` gives each pseudo-sample more time at small ``beta``, where
        it leaves its mode; too small an ``a`` leaves too few pseudo-samples
        cold and raises the error.
    log_scale
        ``log Z^``; None means "estimate with a pilot run" (see
        :mod:`pemc_stan.run.pipeline`); the transformation itself only declares it
        as data.
    beta_min
        Lower end of the support of ``beta`` (``pi`` and ``g`` live on
        ``(beta_min, 1)``).  The default (None) is :data:`AUTO_BETA_MIN` = 0.01
        under whole-posterior tempering, where a pseudo-sample at ``beta`` near 0
        sees an almost flat density and leaves for regions whose curvature NUTS
        cannot follow (NUTS diverges there), and 0 (the paper's ``(0, 1)``)
        under likelihood tempering, where the prior holds every pseudo-sample.  Under
        whole-posterior tempering ``C = int Z~(beta) g(beta) dbeta`` of eq 7
        must be finite, but ``Z~(beta) = int gamma~(x)^beta dx`` grows like
        ``beta^(-d/2)`` (Gaussian tails, ``d`` unconstrained dimensions) or
        ``beta^(-d)`` (exponential tails) as ``beta -> 0``: with a uniform
        ``g`` the instrumental is improper for ``d >= 2`` and ``beta`` drifts
        to 0.  Remedies: ``beta_min > 0``, ``instrumental=(a, 1)`` with
        ``a`` above that exponent, a fixed ladder, or
        ``temper="likelihood"`` (then ``Z~(beta) <= 1`` for a proper
        prior).  ``beta_min`` also sets how far the hottest pseudo-samples
        roam: around a mode of width ``s``, ``gamma^beta`` has width
        ``s / sqrt(beta)``.  Choose it so that ``s / sqrt(beta_min)`` is one
        to a few times the distance between modes; a much smaller value makes
        the hot pseudo-samples spend their time far away from every mode.
    noncentring
        Partial non-centring exponent ``alpha`` in [0, 1] (default 0: off).
        With ``alpha > 0`` NUTS moves ``v_i`` and the unconstrained coordinates
        of pseudo-sample ``i`` are ``u_i = v_i * beta_i^(-alpha/2)`` (Stan's
        own constraining transforms then give ``x_i``, and the log-Jacobian
        ``-(alpha/2) dim(u) log beta_i`` is added), so a hot pseudo-sample,
        ``s / sqrt(beta)`` wide around a mode of width ``s``, is no longer
        that much wider than a cold one in the coordinates NUTS moves.  The
        target is unchanged; only the sampler's geometry is.  Supported for
        ``real``, ``vector``, ``row_vector`` and ``matrix`` parameters (not
        arrays of them) with no constraint or ``lower``/``upper`` bounds that
        do not depend on other parameters.  A middle value such as ``0.5`` can
        lower the error per iteration but costs more gradients per iteration, and
        with few pseudo-samples warm-up may end with too large a step size: check
        the divergences (docs/decisions.md).
    beta_marginal
        ``"length"`` (the default): when the inverse temperatures are sampled from
        a uniform ``g`` with ``pi = g`` under likelihood or base tempering and
        ``N > 1``, a short first round is run, and from its pseudo-samples that do not carry the
        weight -- draws of the instrumental ``q(x, beta)`` -- a bias ``h(beta)``
        (:func:`~pemc_stan.methods.tempering.length_bias`, as
        continuous tempering's) that spreads their time evenly along the bridge's
        thermodynamic length and in ``beta``; the final round samples with
        ``g(beta) ∝ exp(-h(beta))`` (and ``pi = g``, so the weights are unchanged).
        With a uniform ``g`` the copies' ``beta``-marginal is ``∝ Z~(beta)``, which
        dips by nats between the ends when the base (or prior) differs from the
        target: the copies then crowd near ``beta = 1`` and seldom carry a new mode
        from the base to the target.
        ``"flat"``: one round with the uniform ``g``.
    reparameterize
        ``"auto"`` (the default): non-centre hierarchical normal priors in the
        generated program by offset/multiplier
        (:mod:`pemc_stan.stan.reparameterize`: the funnel between ``theta``
        and ``tau`` goes, the model stays); ``"none"``: as written.
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

    n_pseudo: int = option(3, "number of pseudo-samples N", metavar="N")
    beta: str | Sequence[float] = option(
        "estimate", "'estimate' or a fixed ladder of N inverse temperatures, e.g. 0.1,0.5,1",
        parse=parse_ladder, metavar="LADDER")
    temper: str = option(AUTO, "temper the whole density, only the likelihood, the whole "
                         "density towards a Gaussian base, or auto (towards a base when a "
                         "prior is flat, else the likelihood when there is one)",
                         choices=TEMPER_CHOICES)
    beta_prior: Any = option(AUTO, "Beta prior pi(beta): 'auto' (= g), 'uniform' or A,B",
                             parse=parse_beta_density, metavar="A,B")
    instrumental: Any = option(AUTO, "instrumental density g(beta): 'auto' (proper for the "
                               "model's dimension), 'uniform' or A,B",
                               parse=parse_beta_density, metavar="A,B")
    log_scale: float | None = option(None, "offset log Z^ (default: Pathfinder pilot "
                                     "estimate)", parse=float, metavar="X")
    beta_min: float | None = option(None, "lower end of beta's support (default: 0.01 under "
                                    "whole-posterior tempering, else 0)", parse=float,
                                    metavar="B")
    noncentring: float = option(0.0, "partial non-centring of the pseudo-samples' "
                                "unconstrained coordinates by beta^(-ALPHA/2), ALPHA in [0, 1] "
                                "(0: off)", metavar="ALPHA")
    beta_marginal: str = beta_marginal_option(
        "with a uniform instrumental under likelihood or base tempering: a short first round "
        "fits a bias on beta that spreads the copies' time along the bridge (length), or "
        "one round with the uniform g (flat)")
    reparameterize: str = reparameterize_option()
    marginalise: str = marginalise_option()
    split_modes: str = split_modes_option()

    def validate(self) -> PseudoExtendedOptions:
        """Check the options.

        Returns
        -------
        PseudoExtendedOptions
            ``self``, for chaining.

        Raises
        ------
        OptionsError
            Naming the argument, the value and what was expected.
        """
        n = self.n_pseudo
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise OptionsError("n_pseudo", n, "an integer >= 1 (the number of pseudo-samples)")
        if isinstance(self.beta, str):
            if self.beta != "estimate":
                raise OptionsError("beta", self.beta, f"'estimate' or a ladder of {n} values in "
                                   "(0, 1]")
        else:
            ladder = list(self.beta)
            if len(ladder) != n:
                raise OptionsError("beta", ladder, "one inverse temperature per pseudo-sample",
                                   message=f"beta has {len(ladder)} values but n_pseudo={n}; "
                                   "expected one inverse temperature per pseudo-sample")
            for b in ladder:
                if not isinstance(b, (int, float)) or not (0.0 < float(b) <= 1.0):
                    raise OptionsError("beta", ladder, "inverse temperatures in (0, 1]",
                                       message=f"beta={ladder!r} is invalid: {b!r} is outside "
                                       "(0, 1]; expected inverse temperatures in (0, 1]")
            if not all(is_auto(v) or as_beta(v, name).is_uniform for name, v in
                       (("beta_prior", self.beta_prior), ("instrumental", self.instrumental))):
                raise OptionsError("beta_prior", self.beta_prior, "'uniform' with a fixed ladder",
                                   message="beta_prior/instrumental are only used when "
                                   "beta='estimate'; a fixed ladder has no beta densities")
        if self.temper not in TEMPER_CHOICES:
            raise OptionsError("temper", self.temper, "'auto', 'posterior', 'likelihood' or "
                               "'base'")
        for name in ("beta_prior", "instrumental"):
            if not is_auto(getattr(self, name)):
                as_beta(getattr(self, name), name)
        bm = self.beta_min
        if bm is not None and (isinstance(bm, bool) or not isinstance(bm, (int, float))
                               or not 0.0 <= bm < 1.0):
            raise OptionsError("beta_min", bm, "a number in [0, 1) or None (automatic)")
        if self.fixed_ladder is not None and bm not in (None, 0.0):
            raise OptionsError("beta_min", bm, "0 with a fixed ladder",
                               message="beta_min is only used when beta='estimate'")
        a = self.noncentring
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= a <= 1.0:
            raise OptionsError("noncentring", a, "a number in [0, 1] (0: off, 1: fully "
                               "non-centred)")
        if self.log_scale is not None and not math.isfinite(float(self.log_scale)):
            raise OptionsError("log_scale", self.log_scale, "a finite number or None (pilot "
                               "estimate)")
        check_choice("reparameterize", self.reparameterize, REPARAMETERIZE_CHOICES)
        check_choice("marginalise", self.marginalise, MARGINALISE_CHOICES)
        check_choice("split_modes", self.split_modes, SPLIT_MODES_CHOICES)
        check_choice("beta_marginal", self.beta_marginal, BETA_MARGINALS)
        return self

    @property
    def fixed_ladder(self) -> tuple[float, ...] | None:
        """The ladder as a tuple, or None when ``beta="estimate"``."""
        return None if isinstance(self.beta, str) else tuple(float(b) for b in self.beta)
