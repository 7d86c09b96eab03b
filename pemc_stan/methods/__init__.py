"""The sampling methods, side by side behind :mod:`pemc_stan.methods.registry`.

Each method lives in a folder of its own under this package (options,
transform, model, fit and its own estimators; its template is
``stan_templates/<name>.stan.jinja``) whose ``__init__`` defines ``METHOD``, a
:class:`~pemc_stan.methods.registry.Method`.  Importing this package imports
every such folder and registers its method, so a new method needs no edit
here.  :mod:`pemc_stan.sampling` holds the model and fit the methods share.
"""

from __future__ import annotations

import importlib
import pkgutil

from pemc_stan.methods import registry

__all__ = ["registry"]


def _register_method_folders() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        method = getattr(module, "METHOD", None)
        if isinstance(method, registry.Method):
            registry.register(method)


_register_method_folders()
