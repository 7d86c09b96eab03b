"""Exceptions raised by pemc-stan."""

from __future__ import annotations


class PemcStanError(Exception):
    """Base class of every error pemc-stan raises on purpose."""
