"""The example models gallery, shipped inside the wheel as ``pemc_stan.models``.

Data files only: see :mod:`pemc_stan.stan.examples` and ``models/README.md``.
"""
