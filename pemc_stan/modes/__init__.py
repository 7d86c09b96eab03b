"""What the pemc-stan methods share about the target's modes.

The pilot's search for modes (:mod:`~pemc_stan.core.search`,
:mod:`~pemc_stan.modes.pilot`), the mode split that samples separated modes by their own
NUTS chains (:mod:`~pemc_stan.modes.split`), its wide importance check
(:mod:`~pemc_stan.modes.wide`), and the density programs and bridge sampling both use
(:mod:`~pemc_stan.modes.density`, :mod:`~pemc_stan.modes.bridge`).
"""
