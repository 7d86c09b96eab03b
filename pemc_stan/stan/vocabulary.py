"""The fixed vocabulary of the Stan language (stanc 2.35) that the front end relies on.

Operators, the names of basic types by the sizes and constraints they take, the
program blocks in order, the words stanc reserves, and which names are valid new
identifiers.  The parser, the symbol table and the printer's tests read these; the
tree's nodes themselves are in :mod:`pemc_stan.stan.ast`.
"""

from __future__ import annotations

import re

__all__ = [
    "BINARY_OPERATORS",
    "UNARY_OPERATORS",
    "ASSIGNMENT_OPERATORS",
    "SCALAR_TYPES",
    "VECTOR_TYPES",
    "MATRIX_TYPES",
    "CONSTRAINED_VECTOR_TYPES",
    "CONSTRAINED_MATRIX_TYPES",
    "BLOCK_NAMES",
    "RESERVED_WORDS",
    "is_valid_identifier",
]

#: Binary operators, as written in Stan.
BINARY_OPERATORS = frozenset(
    {"||", "&&", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", ".*", "./",
     "\\", "%/%", "^", ".^"}
)
#: Prefix operators.
UNARY_OPERATORS = frozenset({"!", "-", "+"})
#: Operators of assignment statements.
ASSIGNMENT_OPERATORS = frozenset({"=", "+=", "-=", "*=", "/=", ".*=", "./="})

#: Basic types without sizes (the only ones that may carry an
#: :class:`~pemc_stan.stan.ast.Affine` or :class:`~pemc_stan.stan.ast.Bounds` constraint
#: besides the vector and matrix types).
SCALAR_TYPES = frozenset({"int", "real", "complex"})
#: Types sized by one expression that may take a constraint.
VECTOR_TYPES = frozenset({"vector", "row_vector", "complex_vector", "complex_row_vector"})
#: Types sized by two expressions that may take a constraint.
MATRIX_TYPES = frozenset({"matrix", "complex_matrix"})
#: Constrained vector types (one size, no bounds).
CONSTRAINED_VECTOR_TYPES = frozenset({"ordered", "positive_ordered", "simplex", "unit_vector"})
#: Constrained matrix types (one size; ``cholesky_factor_cov`` takes one or two).
CONSTRAINED_MATRIX_TYPES = frozenset(
    {"cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix", "cov_matrix"}
)

#: Program block names in program order (``Program`` field name, Stan name).
BLOCK_NAMES: tuple[tuple[str, str], ...] = (
    ("functions", "functions"),
    ("data", "data"),
    ("transformed_data", "transformed data"),
    ("parameters", "parameters"),
    ("transformed_parameters", "transformed parameters"),
    ("model", "model"),
    ("generated_quantities", "generated quantities"),
)


#: Words stanc 2.35 rejects as variable or function names: the keywords of the
#: grammar plus the extra words stanc reserves (checked against stanc 2.35).
#: Names ending in ``__`` are reserved too (see :func:`is_valid_identifier`).
RESERVED_WORDS = frozenset(
    {
        # block names and statement keywords
        "functions", "data", "transformed", "parameters", "model", "generated",
        "quantities", "return", "if", "else", "while", "for", "in", "break",
        "continue", "print", "reject", "fatal_error", "target", "profile",
        # types and constraints
        "void", "int", "real", "complex", "vector", "row_vector", "matrix",
        "complex_vector", "complex_row_vector", "complex_matrix", "ordered",
        "positive_ordered", "simplex", "unit_vector", "cholesky_factor_corr",
        "cholesky_factor_cov", "corr_matrix", "cov_matrix", "array", "tuple",
        "lower", "upper", "offset", "multiplier",
        # reserved by stanc without being part of the grammar
        "true", "false", "repeat", "until", "then", "struct", "typedef",
        "export", "auto", "extern", "var", "static",
    }
)

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


def is_valid_identifier(name: str) -> bool:
    """Whether ``name`` can name a new variable or function in stanc 2.35.

    Note that ``jacobian`` is valid in 2.35 but reserved from 2.38 on (stanc
    warns), so new names should avoid it as well.

    Raises
    ------
    Nothing.
    """
    return (
        _IDENTIFIER.match(name) is not None
        and not name.endswith("__")
        and name not in RESERVED_WORDS
    )
