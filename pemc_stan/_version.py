"""The package version, in a module of its own so that any module can import it
without importing the package's public API (and so without an import cycle)."""

from __future__ import annotations

__version__ = "0.1.0"
