"""What a method's fit supplies (:class:`FitHooks`), its additions to the output
(:class:`OutputExtras`) and a weighted estimate (:class:`WeightedEstimate`)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.output.diagnostics import (
    Reason,
)

logger = logging.getLogger(__name__)

__all__ = ["FitHooks", "OutputExtras", "WeightedEstimate"]


class WeightedEstimate(dict[str, float]):
    """``{"mean", "mcse", "ess"}`` of a weighted expectation (a dict with attribute access),
    with ``"khat"`` and ``"khat_max"`` where the tail of its terms was measured
    (:func:`~pemc_stan.estimators.tails.tail_fields`)."""

    @property
    def mean(self) -> float:
        """The estimate."""
        return self["mean"]

    @property
    def mcse(self) -> float:
        """Its Monte-Carlo standard error."""
        return self["mcse"]

    @property
    def ess(self) -> float:
        """The effective sample size behind it."""
        return self["ess"]

    @property
    def khat(self) -> float:
        """The Pareto ``k`` of its terms' tail (NaN: not measured)."""
        return self.get("khat", float("nan"))

    @property
    def tail_reliable(self) -> bool:
        """False when its terms' tail is too heavy for its error bar (``khat`` above the
        bound for their number): the variance behind it is infinite or unresolved."""
        return not self.khat > self.get("khat_max", float("inf"))


@dataclass(frozen=True)
class OutputExtras:
    """A method's own additions to the InferenceData and to ``estimates.json``.

    Attributes
    ----------
    attributes
        Attributes of the posterior group (numbers and strings: ``pemc_log_zeta``).
    settings
        Values the run used besides its options (an estimated offset), for ``estimates.json``.
    sample_stats
        ``sample_stats`` variables, ``name -> (dims, values)``.
    sample_stats_attrs
        Attributes of the ``sample_stats`` group.
    extended
        Variables of the ``extended_posterior`` group, ``(chain, draw[, particle])``.
    """

    attributes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    sample_stats: Mapping[str, tuple[tuple[str, ...], NDArray[Any]]] = dataclasses.field(
        default_factory=dict)
    sample_stats_attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    extended: Mapping[str, NDArray[Any]] = dataclasses.field(default_factory=dict)


class FitHooks(Protocol):
    """What a method's fit supplies; :class:`ExtendedFit` has a default for each.

    A method's fit subclasses :class:`ExtendedFit` and overrides only these
    public hooks (and the class attributes ``particle_dim`` and ``resampling``);
    everything else (expectations, resampling, generated quantities, the shared
    checks, summaries, output) is :class:`ExtendedFit`'s and works from them.
    """

    def particle_columns(self) -> dict[str, list[str]]:
        """Original parameter column -> the extended columns of its particles."""

    def particle_log_weights(self) -> NDArray[np.float64]:
        """Unnormalised log weights of the particles, shape (chains, draws, K)."""

    def chain_expectations(self, column: str) -> tuple[NDArray[np.float64],
                                                       NDArray[np.float64]]:
        """Each chain's weighted mean of ``column`` and its standard error."""

    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The method's own named checks of the verdict."""

    def run_log_z(self) -> EvidenceEstimate | None:
        """The method's own ``log Z`` estimate (None when it has none)."""

    def evidence_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate:
        """``log Z`` by one of the method's own estimators."""

    def output_extras(self) -> OutputExtras:
        """The method's additions to the InferenceData and the run folder."""
