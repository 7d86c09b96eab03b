"""``python -m pemc_stan``: the pemc-stan command line."""

import sys

from pemc_stan.cli import main

if __name__ == "__main__":
    sys.exit(main())
