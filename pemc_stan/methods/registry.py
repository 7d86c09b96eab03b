"""Public entry point of the program transformations.

:func:`transform` turns a user's Stan program into the program of a
multimodal-sampling method:

* ``"pseudo_extended"`` / ``"pe"`` -- the pseudo-extended target of Nemeth et
  al. (2019), eq 8; see :mod:`pemc_stan.methods.pseudo_extended.transform`.
* ``"continuous_tempering"`` / ``"ct"`` -- joint continuous tempering of
  Graham & Storkey (2017), eq 15; see :mod:`pemc_stan.methods.continuous_tempering.transform`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from pemc_stan.stan import ast
from pemc_stan.methods.continuous_tempering.transform import (
    ContinuousTemperingOptions,
    ContinuousTemperingResult,
    transform_continuous_tempering,
)
from pemc_stan.methods.pseudo_extended.transform import (
    PseudoExtendedOptions,
    TransformResult,
    transform_pseudo_extended,
)

logger = logging.getLogger(__name__)

__all__ = ["transform", "transform_result", "METHODS"]

#: Accepted method names and their canonical form.
METHODS = {
    "pseudo_extended": "pseudo_extended", "pe": "pseudo_extended",
    "pseudo-extended": "pseudo_extended",
    "continuous_tempering": "continuous_tempering", "ct": "continuous_tempering",
    "continuous-tempering": "continuous_tempering",
}


def _canonical(method: str) -> str:
    try:
        return METHODS[method.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"method={method!r} is unknown; expected one of "
                         f"{sorted(set(METHODS))}") from None


def transform_result(
    program: str | os.PathLike[str] | ast.Program,
    method: str = "pseudo_extended",
    **options: Any,
) -> TransformResult | ContinuousTemperingResult:
    """Transform a program and return the program with its metadata.

    Parameters
    ----------
    program
        Stan program text, a ``.stan`` path or a parsed program.
    method
        ``"pseudo_extended"`` (``"pe"``) or ``"continuous_tempering"`` (``"ct"``).
    **options
        Fields of :class:`~pemc_stan.methods.pseudo_extended.transform.PseudoExtendedOptions`
        (``n_pseudo``, ``beta``, ``temper``, ``beta_prior``, ``instrumental``,
        ``log_scale``) or of
        :class:`~pemc_stan.methods.continuous_tempering.transform.ContinuousTemperingOptions`
        (``temper``, ``base_covariance``, ``log_zeta``, ...), and ``name``.

    Returns
    -------
    TransformResult or ContinuousTemperingResult

    Raises
    ------
    ValueError
        For an unknown method or invalid options.
    StanProgramError
        For programs the transformation does not apply to (see
        :func:`~pemc_stan.methods.pseudo_extended.transform.transform_pseudo_extended` and
        :func:`~pemc_stan.methods.continuous_tempering.transform.transform_continuous_tempering`).
    """
    canonical = _canonical(method)
    name = options.pop("name", None)
    if canonical == "continuous_tempering":
        return transform_continuous_tempering(program, ContinuousTemperingOptions(**options),
                                              name=name)
    opts = PseudoExtendedOptions(**options)
    return transform_pseudo_extended(program, opts, name=name)


def transform(
    program: str | os.PathLike[str] | ast.Program,
    method: str = "pseudo_extended",
    **options: Any,
) -> str:
    """Return the Stan code of the transformed program.

    Parameters and errors as :func:`transform_result`.

    Returns
    -------
    str

    Raises
    ------
    ValueError, StanProgramError
        As :func:`transform_result`.
    """
    return transform_result(program, method, **options).stan_code
