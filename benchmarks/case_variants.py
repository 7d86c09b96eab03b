"""New draws of the shared multimodal cases' kinds, for a sweep the defaults were not fitted to.

The project is judged on cases of the same kinds as ``../shared/validation/multimodal`` that
it does not see.  This writes such cases: each variant runs one generator of the shared
``make_cases.py`` (read at run time, not copied) with its seed or parameters changed, and
writes ``model.stan``, ``data.json`` and ``truth.json`` (the same exact answers, by the same
enumeration, conjugacy or quadrature) under ``OUT/multimodal/<variant>``.  Score them with::

    python benchmarks/case_variants.py --out /tmp/variants
    python benchmarks/validation.py --validation /tmp/variants --cases bz20_s2021 ... --seed 1

The findings are in docs/validation.md, "Cases of the shared kinds, drawn anew".
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[2] / "shared" / "validation" / "multimodal"

#: variant -> (the shared generator, [(text in its source, replacement)])
VARIANTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "bz20_s2021": ("boltzmann_20", [("default_rng(2020)", "default_rng(2021)")]),
    "bz20_s2022": ("boltzmann_20", [("default_rng(2020)", "default_rng(2022)")]),
    "bz20_s2023": ("boltzmann_20", [("default_rng(2020)", "default_rng(2023)")]),
    "bz20_s2024": ("boltzmann_20", [("default_rng(2020)", "default_rng(2024)")]),
    "bz20_s2025": ("boltzmann_20", [("default_rng(2020)", "default_rng(2025)")]),
    "bz16_s7": ("boltzmann_20", [("default_rng(2020)", "default_rng(7)"), ("n = 20", "n = 16")]),
    "pb6": ("product_bimodal_5", [
        ("w = [0.7, 0.6, 0.85, 0.5, 0.75]", "w = [0.55, 0.8, 0.65, 0.9, 0.6, 0.7]"),
        ("a = [1.8, 2.2, 1.5, 2.0, 2.5]", "a = [2.0, 1.6, 2.4, 1.9, 2.1, 1.7]"),
        ("s_a = [0.5, 0.6, 0.4, 0.7, 0.5]", "s_a = [0.6, 0.4, 0.5, 0.5, 0.7, 0.45]"),
        ("b = [-1.6, -2.0, -2.2, -1.8, -1.5]", "b = [-1.9, -2.1, -1.5, -2.0, -1.7, -2.3]"),
        ("s_b = [0.8, 0.5, 0.6, 0.7, 0.9]", "s_b = [0.5, 0.7, 0.6, 0.8, 0.5, 0.6]"),
        ("range(5)", "range(6)"), ('"d": 5', '"d": 6')]),
    "cp_w80": ("curved_pair_2d", [
        ("w = [0.65, 0.35]", "w = [0.8, 0.2]"),
        ("c, s1 = [-2.5, 2.5], [1.0, 0.8]", "c, s1 = [-2.2, 2.4], [0.9, 0.8]"),
        ("m, k, s2 = [-1.0, 1.0], [0.8, -0.8], [0.35, 0.35]",
         "m, k, s2 = [-1.0, 1.0], [1.0, -0.6], [0.3, 0.4]")]),
    "cp_close": ("curved_pair_2d", [("c, s1 = [-2.5, 2.5], [1.0, 0.8]",
                                     "c, s1 = [-1.8, 1.8], [1.0, 0.8]")]),
    "chg_s32": ("changepoint_normal", [
        ("default_rng(31)", "default_rng(32)"),
        ("np.where(t <= 14, 0.0, np.where(t <= 27, 0.9, 0.3))",
         "np.where(t <= 10, 0.0, np.where(t <= 30, 0.8, 0.2))")]),
    "chg_s33": ("changepoint_normal", [
        ("default_rng(31)", "default_rng(33)"),
        ("np.where(t <= 14, 0.0, np.where(t <= 27, 0.9, 0.3))", "np.where(t <= 20, 0.5, -0.3)")]),
}


def write_variant(source: str, name: str, out: Path) -> None:
    """Run the shared generator named in :data:`VARIANTS` for ``name`` with its changes,
    writing into ``out``.

    Raises
    ------
    ValueError
        If the shared script no longer holds the generator or a text to change.
    """
    base, changes = VARIANTS[name]
    found = re.search(rf"^def {base}\(\):.*?(?=^def |^if __name__)", source, re.S | re.M)
    if found is None:
        raise ValueError(f"{SHARED / 'make_cases.py'} has no function {base}")
    code = found.group(0)
    for old, new in changes:
        if old not in code:
            raise ValueError(f"{base} in the shared make_cases.py no longer holds {old!r}")
        code = code.replace(old, new)
    code = code.replace(f'write("{base}"', f'write("{name}"')
    # the shared script's imports, HERE and write(), with HERE moved to ``out``
    namespace: dict[str, Any] = {"__name__": "shared_make_cases",
                                 "__file__": str(SHARED / "make_cases.py")}
    exec(compile(source, str(SHARED / "make_cases.py"), "exec"), namespace)
    namespace["HERE"] = out
    exec(compile(code, str(SHARED / "make_cases.py"), "exec"), namespace)
    namespace[base]()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder to write OUT/multimodal/ in")
    p.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    args = p.parse_args(argv)
    out = args.out / "multimodal"
    out.mkdir(parents=True, exist_ok=True)
    source = (SHARED / "make_cases.py").read_text()
    for name in args.variants:
        write_variant(source, name, out)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
