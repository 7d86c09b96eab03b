"""Exceptions raised by pemc-stan.

Hierarchy::

    PemcStanError                  every error pemc-stan raises on purpose
    ├── StancError                 stanc could not be run or answered nonsense
    └── StanProgramError           something is wrong with a Stan program
        ├── StanSyntaxError        stanc rejected it: syntax (parsing/lexing) error
        ├── StanSemanticError      stanc rejected it: semantic (type, scope) error
        └── UnsupportedConstructError
                                   stanc accepted it but pemc-stan cannot handle
                                   a construct in it

A :class:`StanProgramError` knows where the problem is (``filename``, ``line``
1-based, ``column`` 0-based as stanc counts columns) and carries ``message``;
for errors reported by stanc, ``message`` is stanc's own report, verbatim.
"""

from __future__ import annotations


class PemcStanError(Exception):
    """Base class of every error pemc-stan raises on purpose."""


class StancError(PemcStanError):
    """stanc failed for a reason other than an error in the program.

    For example it could not be started, crashed, or reported an error in a
    format pemc-stan does not recognise (the output is in the message).
    """


class StanProgramError(PemcStanError):
    """An error in a Stan program, located in its source.

    Attributes
    ----------
    filename
        Name of the program as used in messages.
    line
        1-based line of the error (0 when unknown).
    column
        0-based column of the error, as stanc reports it (0 when unknown).
    message
        The full report; for errors found by stanc, stanc's message verbatim.
    """

    def __init__(self, message: str, filename: str = "<string>", line: int = 0, column: int = 0):
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return self.message


class StanSyntaxError(StanProgramError):
    """stanc (or pemc-stan's parser, when stanc was not consulted) found a syntax error."""


class StanSemanticError(StanProgramError):
    """stanc found a semantic error (types, scopes, signatures, ...)."""


class UnsupportedConstructError(StanProgramError):
    """The program is valid Stan but uses a construct pemc-stan cannot handle.

    Attributes
    ----------
    construct
        Short description of the construct (e.g. ``"#include"`` or the
        unexpected token).
    """

    def __init__(
        self,
        message: str,
        filename: str = "<string>",
        line: int = 0,
        column: int = 0,
        construct: str = "",
    ):
        super().__init__(message, filename, line, column)
        self.construct = construct
