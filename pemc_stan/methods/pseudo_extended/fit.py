"""Post-processing of a pseudo-extended (PE) fit.

A PE run samples ``(x_{1:N}, beta_{1:N})`` from the extended target (eq 8 of
Nemeth et al. 2019).  By Theorem 2.1, within each draw ``t`` the
self-normalised weights ``W_ti = w_ti / sum_j w_tj`` (eq 3) make
``sum_i W_ti f(x_ti)`` an unbiased-in-expectation estimate of ``E_pi[f]``::

    log w_ti = (1 - beta_ti) log gamma~(x_ti) + log pi(beta_ti) - log g(beta_ti)

(``log gamma~`` replaced by the offset log likelihood ``log L~`` under
likelihood-only tempering; the ``pi``/``g`` terms are absent for a fixed
ladder).  :class:`PseudoExtendedFit` computes these weights in Python from the
draws, the per-draw and overall weight ESS, weighted expectations
``mean_t sum_i W_ti f(x_ti)`` with an MCSE from the autocorrelation-aware ESS
of the per-draw estimates, and resampled draws of the original parameters (one
pseudo-sample per iteration, so chains stay chains) on which the original
model's transformed parameters and generated quantities are recomputed with
cmdstanpy's standalone ``generate_quantities``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import cmdstanpy
import numpy as np
from numpy.typing import NDArray
from scipy import stats

from pemc_stan.errors import PseudoExtendedDiagnosticWarning
from pemc_stan.estimators import weights as W
from pemc_stan.methods.pseudo_extended.estimators import copies_spread, mixture_mean
from pemc_stan.methods.pseudo_extended.options import BetaDensity, as_beta, is_auto
from pemc_stan.methods.pseudo_extended.transform import PseudoExtendedResult
from pemc_stan.methods.tempering import FLAT, BetaBias, length_bias
from pemc_stan.output.diagnostics import RHAT_MAX, Reason, treedepth_advice
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.hooks import OutputExtras, WeightedEstimate

logger = logging.getLogger(__name__)

__all__ = ["PseudoExtendedFit"]

#: Share of NaN pseudo-sample densities above which the verdict is suspect.
DENSITY_FAILURES_MAX = 0.01
#: Share of the temperatures at one end (below 0.05 or above 0.95), with none at the other,
#: above which they pile up there.
BETA_PILE_SHARE_MAX = 0.9
#: The share of draws in which one pseudo-sample carries >= 99% of the weight above which
#: the copies are said to have collapsed (the diagnostics' advice uses the same).
COLLAPSED_SHARE_MIN = 0.9
#: The largest chi-square per degree of freedom of the pseudo-samples' own estimates
#: (:func:`~pemc_stan.methods.pseudo_extended.estimators.copies_spread`) of a run whose
#: copies move between modes: about 1 by chance (1.7-3.5 measured where copies move, 29
#: and more where they stay: docs/decisions.md); with few copies, the chi-square's
#: 0.1% point over the columns where that is larger.
COPIES_SPREAD_MAX = 10.0


class PseudoExtendedFit(ExtendedFit):
    """A pseudo-extended MCMC fit.

    Parameters
    ----------
    fit
        The cmdstanpy fit of the PE program.
    result
        The :class:`~pemc_stan.methods.pseudo_extended.transform.PseudoExtendedResult`
        it was built from.
    log_scale
        The ``pemc_log_scale`` used.
    data
        The user's data (for generated quantities of the original model).
    original_model
        A callable returning the compiled original model (compiled lazily, for
        :meth:`resampled_draws_pd` with generated quantities), or the model.
    seed
        Seed of the resampling.
    g_shape
        The shape ``a`` of the 'auto' instrumental ``g = Beta(a, 1)`` (None otherwise).
    base
        The base density under ``temper="base"`` (None otherwise).
    base_notes
        ``(name, message, remedy)`` of the approximations of the base that failed and
        were replaced by the next one.
    pilot_notes
        ``(name, message, remedy)`` of the pilots that failed.
    bias
        The bias ``h`` of ``g(beta) ∝ exp(-h(beta))`` when the program is shaped
        (``result.shaped``; None: ``h = 0``).
    first_round
        What the round that fitted ``bias`` was (``iter_warmup``, ``iter_sampling``,
        the share of its copies' temperatures in each tenth of (0, 1)); None when
        there was none.
    search
        The pilot's search for modes (:class:`~pemc_stan.core.search.ModeSearch`; None
        when it did not search).

    Attributes
    ----------
    fit, result, log_scale, n_pseudo, g_shape, base, base_notes, pilot_notes, bias,
    first_round
    """

    particle_dim: ClassVar[str | None] = "pseudo"
    result: PseudoExtendedResult

    def __init__(self, fit: cmdstanpy.CmdStanMCMC, result: PseudoExtendedResult,
                 log_scale: float, data: Mapping[str, Any] | None = None,
                 original_model: cmdstanpy.CmdStanModel | Callable[[], cmdstanpy.CmdStanModel]
                 | None = None, seed: int | None = None, g_shape: float | None = None,
                 base: Any = None, base_notes: Sequence[tuple[str, str, str]] = (),
                 pilot_notes: Sequence[tuple[str, str, str]] = (),
                 bias: BetaBias | None = None, first_round: dict[str, Any] | None = None,
                 search: Any = None) -> None:
        super().__init__(fit, result, data=data, original_model=original_model, seed=seed)
        self.search = search
        self.bias = bias or FLAT
        self.first_round = first_round
        self.log_scale = float(log_scale)
        self.g_shape = g_shape
        self.n_pseudo = result.options.n_pseudo
        self.pilot_notes: tuple[tuple[str, str, str], ...] = tuple(pilot_notes)
        self.base: Any = base
        self.base_notes: tuple[tuple[str, str, str], ...] = tuple(base_notes)
        self._particle_cols: dict[str, list[str]] | None = None
        #: Pseudo-samples whose log density was NaN, and draws where every one was.
        self.density_failures, self.failed_draws = self._carry_over_failed_draws()

    def _carry_over_failed_draws(self) -> tuple[int, int]:
        """Replace each draw whose pseudo-samples all failed by the chain's previous draw.

        A solver can fail in generated quantities (double arithmetic) where it
        succeeded in the model block (autodiff) at a far-out point; a draw whose
        every ``log gamma`` is NaN has no weight to give, and normalising
        within it would be 0/0.  The chain is then treated as having stayed
        where it was (the previous valid draw, or the next one at the start),
        as a rejected MCMC proposal is; :meth:`check` reports the count.

        Returns
        -------
        (int, int)
            NaN pseudo-samples before the replacement, and draws replaced.
        """
        try:
            lg = self.log_gamma()
        except KeyError:  # no generated quantities (e.g. a fake fit in tests)
            return 0, 0
        nan = np.isnan(lg)
        failed = np.all(nan, axis=-1)  # (chains, draws)
        if failed.any():
            self._draws = self._draws.copy()  # cmdstanpy's own array stays as in the CSVs
        for chain in range(failed.shape[0]):
            bad = np.flatnonzero(failed[chain])
            good = np.flatnonzero(~failed[chain])
            if bad.size == 0 or good.size == 0:
                continue
            before = np.searchsorted(good, bad) - 1  # the previous valid draw
            source = good[np.where(before >= 0, before, 0)]
            self._draws[bad, chain, :] = self._draws[source, chain, :]
        return int(nan.sum()), int(failed.sum())

    # ------------------------------------------------------------------ #
    # raw quantities, arrays shaped (chains, draws, N)
    # ------------------------------------------------------------------ #

    def _gq(self, base: str) -> NDArray[np.float64]:
        names = []
        for k in range(1, self.n_pseudo + 1):
            names.append(f"{base}[{k}]" if f"{base}[{k}]" in self._col else f"{base}.{k}")
        return self._stack(names)

    def beta(self) -> NDArray[np.float64]:
        """Inverse temperatures, shape (chains, draws, N)."""
        ladder = self.result.options.fixed_ladder
        if ladder is not None:
            shape = (self._draws.shape[1], self._draws.shape[0], self.n_pseudo)
            return np.broadcast_to(np.asarray(ladder, dtype=float), shape).copy()
        return self._gq("pemc_beta")

    def log_gamma(self) -> NDArray[np.float64]:
        """``log gamma(x_i)`` (full log density, no offset), shape (chains, draws, N)."""
        return self._gq("pemc_log_gamma")

    def log_weights_stan(self) -> NDArray[np.float64]:
        """Unnormalised log-weights as computed by the Stan program's generated quantities."""
        return self._gq("pemc_log_weight")

    def log_weights(self) -> NDArray[np.float64]:
        """Unnormalised log-weights computed in Python (Theorem 2.1 / eq 3), (chains, draws, N).

        ``(1 - beta) * tau + log pi(beta) - log g(beta)`` with ``tau = log gamma - log_scale``
        (posterior tempering) or ``log L - log_scale`` (likelihood tempering).
        """
        opts, result = self.result.options, self.result
        beta = self.beta()
        tau = (self._gq("pemc_log_lik") if result.temper in ("likelihood", "base")
               else self.log_gamma()) - self.log_scale
        with np.errstate(invalid="ignore"):
            lw = (1.0 - beta) * tau
        if opts.fixed_ladder is None and not result.pi_equals_g:
            pi_b = as_beta(opts.beta_prior, "beta_prior")
            g_b = (BetaDensity(float(self.g_shape or 1.0), 1.0) if result.g_shape_from_data
                   else BetaDensity() if is_auto(opts.instrumental)
                   else as_beta(opts.instrumental, "instrumental"))
            if not pi_b.is_uniform:
                lw = lw + stats.beta.logpdf(beta, pi_b.a, pi_b.b)
            if not g_b.is_uniform:
                lw = lw - stats.beta.logpdf(beta, g_b.a, g_b.b)
        lw = np.asarray(lw, dtype=float)
        # a pseudo-sample whose density could not be evaluated (an ODE or algebraic solver
        # failing far out in a hot copy) gets no weight; check() reports how many
        return np.where(np.isnan(lw), -np.inf, lw)

    def next_bias(self) -> BetaBias:
        """The bias ``h`` for a further round, fitted to this one's copies (``beta_marginal``).

        Given the draw, the copy that carries the weight is copy ``i`` with probability
        ``W_i`` (Theorem 2.1), and the other copies are then draws of the instrumental
        ``q(x, beta) ∝ b(x) exp(-beta Delta(x) - h(beta))`` with ``Delta = -log``
        of the tempered factor (``log Z^ - log L`` or ``log Z^ + log b - log gamma``):
        continuous tempering's joint with bias ``h``, whose x-marginal is ``b(x) N(x)``
        (:meth:`BetaBias.log_normaliser`).  So every copy enters with importance log
        weight ``log(1 - W_i) - log N(x_i)`` and
        :func:`~pemc_stan.methods.tempering.length_bias` gives the
        next bias (the flat one when these draws cannot judge the next bridge).

        Raises
        ------
        Nothing.
        """
        delta = (self.log_scale - self._gq("pemc_log_lik")).reshape(-1)
        with np.errstate(divide="ignore"):
            not_carrier = np.log1p(-self.normalised_weights()).reshape(-1)
        ok = np.isfinite(delta) & np.isfinite(not_carrier)
        if not np.any(ok):
            return FLAT
        return length_bias(delta[ok], not_carrier[ok] - self.bias.log_normaliser(delta[ok]))

    def particle_log_weights(self) -> NDArray[np.float64]:
        """The pseudo-samples' log weights (:meth:`log_weights`)."""
        return self.log_weights()

    def normalised_weights(self) -> NDArray[np.float64]:
        """Within-draw normalised weights ``W_ti``, shape (chains, draws, N)."""
        return np.exp(W.log_normalise(self.log_weights(), axis=-1))

    def weight_ess(self) -> NDArray[np.float64]:
        """Per-draw weight ESS ``1 / sum_i W_ti^2`` in [1, N], shape (chains, draws)."""
        return np.asarray(W.ess(self.log_weights(), axis=-1))

    def max_weight_share(self, threshold: float = 0.99) -> float:
        """Share of draws in which one pseudo-sample carries >= ``threshold`` of the weight."""
        return W.max_weight_share(self.log_weights(), threshold=threshold, axis=-1)

    # ------------------------------------------------------------------ #
    # parameters
    # ------------------------------------------------------------------ #

    def particle_columns(self) -> dict[str, list[str]]:
        """Original column -> its N copies' PE columns (copy ``k`` of ``mu[2]`` is
        ``mu[k,2]`` when arrayed, ``pemc_mu_k[2]`` when unrolled)."""
        if self._particle_cols is not None:
            return self._particle_cols
        out: dict[str, list[str]] = {}
        for p in self.result.parameters:
            per_copy: list[list[tuple[str, str]]] = []
            for k in range(1, self.n_pseudo + 1):
                pairs: list[tuple[str, str]] = []
                if p.unrolled:
                    v = p.stan_variable(k)
                    for c in self._columns:
                        if c == v or c.startswith(v + "["):
                            pairs.append((p.name + c[len(v):], c))
                else:
                    whole, head = f"{p.name}[{k}]", f"{p.name}[{k},"
                    for c in self._columns:
                        if c == whole or c.startswith(whole + "."):  # scalar (or tuple) copy
                            pairs.append((p.name + c[len(whole):], c))
                        elif c.startswith(head):
                            pairs.append((f"{p.name}[{c[len(head):]}", c))
                per_copy.append(pairs)
            for j, (orig, _) in enumerate(per_copy[0]):
                out[orig] = [pc[j][1] for pc in per_copy]
        self._particle_cols = out
        return out

    def pseudo_samples(self, column: str) -> NDArray[np.float64]:
        """All copies of one original parameter column (e.g. ``"x"`` or ``"mu[2]"``).

        Returns
        -------
        ndarray, shape (chains, draws, N)

        Raises
        ------
        KeyError
            If ``column`` is not a column of an original parameter.
        """
        return self.particles(column)

    def run_expectation(self, f: Callable[[Any], NDArray[np.float64]] | str,
                        estimator: str = "draw") -> WeightedEstimate:
        """Weighted expectation ``E_pi[f(x)]`` with its Monte-Carlo standard error.

        ``estimator="draw"`` (Theorem 2.1): the estimate is ``mean_t h_t`` with
        ``h_t = sum_i W_ti f(x_ti)`` (``E[h_t] = E_pi[f]``); the MCSE is
        ``sd(h) / sqrt(ESS(h))`` with the autocorrelation-aware multi-chain ESS
        of :func:`pemc_stan.estimators.weights.chain_ess`.

        ``estimator="mixture"``: pools every pseudo-sample of every draw,
        each weighted by its probability of being the target component of its
        marginal mixture (:func:`pemc_stan.methods.pseudo_extended.estimators.mixture_mean`;
        one ratio ``Z / Z_q`` for sampled temperatures, one per pseudo-sample
        for a fixed ladder).  Same draws, same cost, and usually a somewhat
        lower MCSE.  The MCSE is that of the per-draw influence series.

        Parameters
        ----------
        f
            A column name of an original parameter (``"x"``, ``"theta[2]"``)
            for its mean, or a callable taking a dict-like ``column ->
            array (chains, draws, N)`` and returning an array of that shape.
        estimator
            ``"draw"`` (default) or ``"mixture"``.

        Returns
        -------
        WeightedEstimate
            Keys ``mean``, ``mcse``, ``ess``.

        Raises
        ------
        KeyError
            For an unknown column.
        ValueError
            For an unknown ``estimator``, or a callable returning the wrong shape.
        """
        if estimator not in ("draw", "mixture"):
            raise ValueError(f"estimator={estimator!r}: expected 'draw' (Theorem 2.1, "
                             "per-draw weights) or 'mixture' (pooled over all draws)")
        if estimator == "draw":
            return super().run_expectation(f)
        values = self._values(f)
        lw = self.log_weights()
        if values.shape != lw.shape:
            raise ValueError(f"f returned shape {values.shape}; expected (chains, draws, N) = "
                             f"{lw.shape}")
        est = mixture_mean(values, lw, pooled=self.result.options.fixed_ladder is None)
        return self._estimate(est.influence, mean=est.mean)

    def weighted_mean_iid(self, column: str) -> W.WeightedMean:
        """Pooled self-normalised IS mean of a column (``estimators.weights.weighted_mean``).

        Pools every (draw, pseudo-sample) pair with its weight normalised
        within its draw (so each draw has total weight 1); the standard error
        treats draws as independent (no autocorrelation correction; prefer
        :meth:`expectation`).

        Raises
        ------
        KeyError
            For an unknown column.
        """
        values = self.pseudo_samples(column).reshape(-1)
        lw = W.log_normalise(self.log_weights(), axis=-1).reshape(-1)
        return W.weighted_mean(values, lw)

    def summary(self, estimator: str | None = None, **kwargs: Any) -> Any:
        """Weighted mean, MCSE and ESS of every original parameter column.

        Parameters
        ----------
        estimator
            As in :meth:`run_expectation`; None: the fit's estimate (:meth:`expectation`:
            the cells' when the run has them, else ``"draw"``).

        Raises
        ------
        ValueError
            For an unknown ``estimator``.
        """
        return super().summary(**kwargs) if estimator is None \
            else super().summary(estimator=estimator, **kwargs)

    # ------------------------------------------------------------------ #
    # diagnostics
    # ------------------------------------------------------------------ #

    def diagnostics(self, warn: bool = True) -> dict[str, Any]:
        """Weight and temperature diagnostics, with advice.

        Returns
        -------
        dict
            ``weight_ess_mean`` (mean per-draw ESS, in [1, N]),
            ``weight_ess_overall`` (ESS of all pooled, per-draw normalised
            weights), ``max_weight_share``, ``beta_mean``, ``beta_quantiles``
            (5%, 50%, 95%), ``divergences``, ``max_treedepth_hits`` (transitions
            stopped at ``max_treedepth``), ``messages`` (advice strings).
        """
        lw = self.log_weights()
        per_draw = self.weight_ess()
        pooled = W.log_normalise(lw, axis=-1).reshape(-1)
        beta = self.beta()
        nuts = self.nuts_counts()
        divergences = nuts.divergences
        info: dict[str, Any] = {
            "weight_ess_mean": float(np.mean(per_draw)),
            "weight_ess_overall": float(W.ess(pooled)),
            "max_weight_share": self.max_weight_share(),
            "beta_mean": float(np.mean(beta)),
            "beta_quantiles": tuple(float(q) for q in np.quantile(beta, [0.05, 0.5, 0.95])),
            "divergences": divergences,
            "max_treedepth_hits": nuts.max_treedepth_hits,
        }
        if self.base is not None:
            info["base"] = str(self.base.info.get("method", "given"))
        if self.first_round is not None:
            info["first_round"] = dict(self.first_round)
            info["beta_bias"] = {"knots": self.bias.knots.tolist(),
                                 "values": self.bias.values.tolist()}
        msgs: list[str] = [f"{message} ({remedy})" for _, message, remedy in self.base_notes]
        n = self.n_pseudo
        if n > 1 and info["max_weight_share"] > COLLAPSED_SHARE_MIN:
            msgs.append(
                f"one pseudo-sample carries >= 99% of the weight in "
                f"{100 * info['max_weight_share']:.0f}% of the draws: the tempered copies rarely "
                "matter. Increase n_pseudo, or try temper='likelihood' or a fixed ladder "
                "(beta=[...]) with more intermediate temperatures.")
        if self.result.options.fixed_ladder is None and info["beta_quantiles"][0] > 0.5 and n > 1:
            msgs.append(
                "the inverse temperatures stay high (5% quantile "
                f"{info['beta_quantiles'][0]:.2f}): little tempering happens. Check log_scale "
                "(a too large offset favours beta near 1) or use a fixed ladder.")
        if info["weight_ess_mean"] < 1.05 and n > 1:
            msgs.append("the per-draw weight ESS is ~1: estimates rely on single pseudo-samples; "
                        "increase n_pseudo.")
        if divergences:
            msgs.append(f"{divergences} divergent transitions: increase adapt_delta or use "
                        "temper='likelihood' (tempered heavy-tailed priors are hard to sample).")
        deeper = treedepth_advice(nuts)
        if deeper:
            msgs.append(deeper)
        if self.density_failures:
            info["density_failures"] = self.density_failures
            info["failed_draws"] = self.failed_draws
            msgs.append(f"the log density of {self.density_failures} pseudo-samples was NaN (a "
                        "solver or function failed there): they got no weight, and "
                        f"{self.failed_draws} draw(s) where all failed count as the chain's "
                        "previous draw.")
        return self._report(info, msgs, warn, PseudoExtendedDiagnosticWarning)

    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The pilot, the weights and the temperatures."""
        for name, message, remedy in self.pilot_notes:
            yield name, Reason(name, message, remedy)
        bad, draws = self.density_failures, self.failed_draws
        replaced = (f"; {draws} draw(s) where every pseudo-sample failed were replaced by "
                    "the chain's previous draw" if draws else "")
        total = self._draws.shape[0] * self._draws.shape[1]
        # A few failures move the estimates by about their share of a standard deviation:
        # reported in diagnostics(); from 1% of the pseudo-samples on, the verdict is suspect.
        yield "density_failures", None if bad <= DENSITY_FAILURES_MAX * total * self.n_pseudo \
            else Reason(
            "density_failures", f"the log density of {bad} pseudo-samples could not be "
            f"evaluated (NaN: a solver or function failed there); they got no weight{replaced}",
            "check the model where the hot pseudo-samples go, or raise beta_min")
        # One pseudo-sample carrying all the weight (a concentrated posterior) is advice in
        # diagnostics(), not a fault: the estimates are those of plain NUTS on the target.
        if self.n_pseudo < 2:
            return
        yield "copies_collapsed", self._collapsed()
        if self.result.options.fixed_ladder is None:
            yield "copies_agree", self._copies_apart()
            beta = self.beta()
            low = float(np.mean(beta < 0.05))
            high = float(np.mean(beta > 0.95))
            yield "beta_ends", None if min(low, high) > 0.0 or max(low, high) < \
                BETA_PILE_SHARE_MAX else Reason(
                "beta_ends", f"{100 * low:.0f}% of the temperatures are below 0.05 and "
                f"{100 * high:.0f}% above 0.95: they pile up at one end (an improper or badly "
                "scaled instrumental)", "set beta_min or instrumental=(a, 1), or pass log_scale")

    def _copies_apart(self) -> Reason | None:
        """The pseudo-samples' own estimates disagree (:func:`copies_spread`, worst column):
        each copy stays in the mode where it started, so the within-draw estimate weighs
        the modes by how many copies sit in each, whatever their masses; the chains can
        agree (alike starts) and more draws of the same run do not change it."""
        lw = self.particle_log_weights()
        columns = self.parameter_columns()
        worst = (0.0, "")
        for column in columns:
            found = copies_spread(self.particles(column), lw)
            # beyond chance at 0.1% over all the columns too (one chain of two copies has
            # one degree of freedom)
            dof = max(found.copies - 1, 1)
            bound = max(COPIES_SPREAD_MAX, float(stats.chi2.isf(1e-3 / len(columns), dof)) / dof)
            if found.spread > bound and found.spread > worst[0]:
                worst = (found.spread, column)
        if not worst[0] > 0:
            return None
        return Reason(
            "copies_agree", f"the pseudo-samples' own weighted means of {worst[1]} lie "
            f"{np.sqrt(worst[0]):.0f} times their standard errors apart (root mean square): "
            "the copies stay in the modes where they started, so the estimate weighs those "
            "modes by how many copies sit in each, not by their mass",
            "run with method='ct' (continuous tempering carries each chain between modes "
            "through the tempered target)")

    def _collapsed(self) -> Reason | None:
        """The tempered copies carry no weight while the chains disagree: PE cannot move
        between the modes here, and more draws of the same run do not change that.

        One copy holding nearly all of every draw's weight leaves the chains to plain NUTS
        on the target; with R-hat over :data:`~pemc_stan.output.diagnostics.RHAT_MAX` they
        sit in different modes.  Alone, either is no reason (a concentrated posterior, or a
        slow run the follow-ups lengthen); together they name the method's failure and the
        method that tempers the whole target instead.
        """
        share = self.max_weight_share()
        if not share > COLLAPSED_SHARE_MIN:
            return None
        rhat = self.worst_rhat()
        if not rhat > RHAT_MAX:
            return None
        return Reason(
            "copies_collapsed", f"one pseudo-sample carries >= 99% of the weight in "
            f"{100 * share:.0f}% of the draws while the chains disagree (R-hat {rhat:.2f}): "
            "the tempered copies do not carry the chains between modes",
            "run with method='ct' (continuous tempering tempers the whole target), or with "
            "more pseudo-samples (n_pseudo)")

    # ------------------------------------------------------------------ #
    # output
    # ------------------------------------------------------------------ #

    def output_extras(self) -> OutputExtras:
        """``pemc_n_pseudo`` and ``pemc_log_scale`` (attributes), the offset ``log_scale``
        (setting); sample stats ``beta``, ``log_weight``, ``weight`` (dim ``pseudo``),
        ``weight_ess`` and ``resample_index`` (none when the posterior draws are the
        cells', :attr:`cell_estimate`).  The extended draws' group holds the pseudo-samples
        alone: their temperatures and log weights are these (each draw kept once)."""
        per = ("chain", "draw", "pseudo")
        beta = np.asarray(self.beta(), dtype=float)
        lw = np.asarray(self.log_weights(), dtype=float)
        kept = {} if self.cell_estimate is not None else {
            "resample_index": (("chain", "draw"),
                               np.asarray(self.resample_index(), dtype=np.int64) + 1)}
        return OutputExtras(
            attributes={"pemc_n_pseudo": int(self.n_pseudo),
                        "pemc_log_scale": float(self.log_scale)},
            settings={"log_scale": float(self.log_scale)},
            sample_stats={
                "beta": (per, beta), "log_weight": (per, lw),
                "weight": (per, np.asarray(self.normalised_weights())),
                "weight_ess": (("chain", "draw"), np.asarray(self.weight_ess(), dtype=float)),
                **kept})

