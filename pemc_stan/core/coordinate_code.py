"""The parameters' base coordinates as generated Stan code.

The maps of :mod:`pemc_stan.core.coordinates` in Stan, used by the
continuous-tempering and pseudo-extended programs: the functions are in
``stan_templates/base_density.stan.jinja``, the statements filling the
vector ``z`` and its log-Jacobian are built here from each parameter's
:class:`~pemc_stan.core.coordinates.ParameterBlock`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pemc_stan.core.coordinates import ParameterBlock
from pemc_stan.core.templates import render
from pemc_stan.stan.printer import print_expr

__all__ = ["stan_base_functions", "stan_coordinate_code", "stan_dim_expr"]

#: The template of the coordinate maps' Stan functions.
_FUNCTIONS_TEMPLATE = "base_density.stan.jinja"


def stan_base_functions(blocks: tuple[ParameterBlock, ...]) -> str:
    """The Stan functions the parameters' coordinate maps need, one group per map.

    Rendered from ``stan_templates/base_density.stan.jinja`` (``""`` when every
    parameter is unconstrained).

    Raises
    ------
    Nothing.
    """
    kinds = sorted({b.kind for b in blocks})
    return render(_FUNCTIONS_TEMPLATE, kinds=kinds).removeprefix("\n")


def stan_coordinate_code(blocks: tuple[ParameterBlock, ...],
                         variable: Mapping[str, str] | None = None, indent: int = 4,
                         z: str = "pemc_z", jacobian: str = "pemc_log_jacobian") -> str:
    """Stan statements filling the vector ``z`` and adding ``log |det dz/dx|`` to ``jacobian``.

    They use the integer locals ``pemc_pos`` (starting at 1) and ``pemc_n``.
    ``variable`` maps a parameter's name to the Stan expression of the value
    to map (default: the name itself; the pseudo-extended program passes
    ``name[pemc_k]``); ``indent`` is the number of leading spaces.
    """
    what = {"identity": "unchanged", "lower": "log(x - lower)", "upper": "log(upper - x)",
            "affine": "(x - offset) / multiplier",
            "interval": "logit((x - lower) / (upper - lower))",
            "simplex": "additive log-ratios", "sum_to_zero": "first K - 1 entries",
            "ordered": "first entry and log differences",
            "positive_ordered": "log first entry and log differences",
            "cholesky_factor_cov": "log diagonal and lower triangle",
            "cov_matrix": "its Cholesky factor's log diagonal and lower triangle",
            "column_stochastic": "additive log-ratios of each column",
            "row_stochastic": "additive log-ratios of each row"}
    lines: list[str] = []
    for b in blocks:
        lines.append(f"// {b.name} ({b.declared}): {what[b.kind]}")
        idx = [f"pemc_i{j + 1}" for j in range(len(b.array_dims))]
        index = f"[{', '.join(idx)}]" if idx else ""
        name = (variable or {}).get(b.name, b.name)
        z_expr, jac_expr = b.stan_element_call(name + index, index)
        body = [f"pemc_n = {b.stan_dim()};",
                f"{z}[pemc_pos:(pemc_pos + pemc_n - 1)] = {z_expr};"]
        if jac_expr:
            body.append(f"{jacobian} += {jac_expr};")
        body.append("pemc_pos += pemc_n;")
        depth = 0
        for j, d in enumerate(b.array_dims):
            lines.append("  " * depth + f"for ({idx[j]} in 1:{print_expr(d)}) {{")
            depth += 1
        lines.extend("  " * depth + s for s in body)
        for _ in range(len(b.array_dims)):
            depth -= 1
            lines.append("  " * depth + "}")
    return "\n".join(" " * indent + s for s in lines)


def stan_dim_expr(blocks: tuple[ParameterBlock, ...]) -> str:
    """Stan expression of the number of base coordinates."""
    terms = []
    for b in blocks:
        d = b.stan_dim()
        factors = [print_expr(e) for e in b.array_dims]
        if factors:
            d = " * ".join(factors + [f"({d})" if (" " in d) else d])
        terms.append(d if " + " not in d or len(blocks) == 1 else f"({d})")
    return " + ".join(terms)
