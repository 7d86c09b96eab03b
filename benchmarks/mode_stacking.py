"""Experiment (#36): evidence-weighted NUTS chains, one per mode the pilot found.

A research measurement, not a method of the package.  CT's and PE's misses on the
multimodal validation set are modes the tempered chains cannot enter: a narrow mode far
from the others (far_modes_2d), a ring of phases (periodic_phase).  The pilot's search
already finds these modes.  When modes are separated, the posterior is the mixture of
its restrictions to the modes' cells, p(x) = sum_k (Z_k / Z) p_k(x), so plain NUTS
chains that each stay in one cell, and each cell's mass Z_k, give every expectation and
log Z = logsumexp(log Z_k) without any chain crossing between modes.

For a case in the shared truth format:

1. the default pilot search of a CT model (Pathfinder from radii 2, 8, 32 until no new
   mode appears) gives the centres of the modes holding >= 0.1% of the mass;
2. one plain NUTS chain (1,000 warm-up, 1,000 draws) starts at each centre;
3. every draw is assigned to its nearest centre (coordinates scaled by the pooled sd);
   cells that one chain's draws share are merged (those modes are connected for NUTS),
   and a chain that leaves its cell is counted;
4. a group of several connected cells gets one run of :data:`GROUP_CHAINS` chains
   started at its centres; each group's log Z_k by bridge sampling (``pemc_stan.evidence``
   on its chain or run), its expectations from those draws;
5. E[f] = sum_k p_k E_k[f], p_k = Z_k / sum Z, with a delta-method standard error
   (each chain's MCSE, and each log Z_k's standard error through p_k).

Scored as ``benchmarks/validation.py`` scores the generic cases (``generic_quantities``:
within 4 standard errors, standard errors capped).

Usage::

    python benchmarks/mode_stacking.py --seed 1            # every generic-format case
    python benchmarks/mode_stacking.py --cases far_modes_2d --seed 2
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import logsumexp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "mode_stacking.jsonl"
#: Chains of the one run over a group of connected modes.
GROUP_CHAINS = 4
CASE_ROOTS = (ROOT.parent / "shared" / "validation" / "multimodal",
              HERE / "validation_cases" / "multimodal")


def generic_cases() -> dict[str, Path]:
    """Cases whose truth.json has the shared format (``mean``/``sd``/``prob``/``log_z``)."""
    out: dict[str, Path] = {}
    for root in CASE_ROOTS:
        for folder in sorted(root.glob("*")):
            truth = folder / "truth.json"
            if truth.is_file() and isinstance(json.loads(truth.read_text()).get("mean"), dict):
                out[folder.name] = folder
    return out


def _union(groups: list[set[int]]) -> list[set[int]]:
    """Merge overlapping sets of cells."""
    merged: list[set[int]] = []
    for g in groups:
        g = set(g)
        for m in [m for m in merged if m & g]:
            merged.remove(m)
            g |= m
        merged.append(g)
    return merged


def run_case(folder: Path, seed: int) -> dict[str, Any]:
    """Pilot, one chain per mode, bridge log Z per merged cell group, the mixture."""
    import arviz as az
    from validation import generic_quantities  # type: ignore[import-not-found]

    import pemc_stan
    from pemc_stan.backend.compile import compile_model
    from pemc_stan.inputs import load_data
    from pemc_stan.pipeline import transform_result

    truth = json.loads((folder / "truth.json").read_text())
    program, data_file = folder / "model.stan", folder / "data.json"
    data = load_data(str(data_file))
    start = time.perf_counter()
    result = transform_result(str(program), method="ct")
    pilot = result.require_method().model(result, data, None).pilot()
    pilot.pathfinder(seed)
    search = pilot.search
    centres = np.asarray(search.centres, dtype=float)
    coords = result.coordinates
    model = compile_model(str(program))
    fits, zs = [], []
    for k, centre in enumerate(centres):
        init = {name: np.asarray(v)[0].tolist()
                for name, v in coords.inverse(centre[None, :], data).items()}
        fit = model.sample(data=str(data_file), chains=1, seed=seed + 7919 * k, inits=init,
                           show_progress=False, show_console=False)
        arr = np.asarray(fit.draws(concat_chains=True), dtype=float)
        z, _ = coords.forward(pilot.param_draws(arr, list(fit.column_names)), data)
        fits.append(fit)
        zs.append(z)
    scale = np.std(np.concatenate(zs), axis=0) + 1e-12
    cells = []
    for z in zs:
        d = np.linalg.norm((z[:, None, :] - centres[None, :, :]) / scale, axis=2)
        cells.append(set(np.unique(np.argmin(d, axis=1)).tolist()))
    left = sum(len(c) > 1 for c in cells)
    groups = _union(cells)
    members = []
    for g, group in enumerate(groups):
        first = next(i for i, c in enumerate(cells) if c & group)
        if len(group) > 1:  # connected modes: one run of GROUP_CHAINS chains over the group
            starts = sorted(group)
            inits = [{name: np.asarray(v)[0].tolist() for name, v in coords.inverse(
                centres[starts[j % len(starts)]][None, :], data).items()}
                for j in range(GROUP_CHAINS)]
            fits.append(model.sample(data=str(data_file), chains=GROUP_CHAINS,
                                     seed=seed + 104729 * (g + 1), inits=inits,
                                     show_progress=False, show_console=False))
            first = len(fits) - 1
        members.append(first)
    log_z, log_z_se = [], []
    for i in members:
        est = pemc_stan.evidence(fits[i], estimator="bridge", program=str(program),
                                 data=str(data_file), seed=seed)
        log_z.append(est.log_z)
        log_z_se.append(est.std_error)
    lz = np.asarray(log_z)
    p = np.exp(lz - logsumexp(lz))
    seconds = time.perf_counter() - start

    def column(fit: Any, name: str) -> np.ndarray:
        return np.asarray(fit.draws_pd()[name], dtype=float)

    record: dict[str, Any] = {
        "case": folder.name, "seed": seed, "seconds": seconds, "modes_found": search.modes,
        "centres": len(centres), "groups": len(groups), "chains_leaving_cell": left,
        "mode_masses": p.tolist(), "z": {}, "se": {}, "estimate": {}}
    quantities = [(key, f, exact, cap) for key, f, exact, cap in generic_quantities(truth)]
    for key, f, exact, cap in quantities:
        means, ses = [], []
        for i in members:
            values = np.asarray(f(lambda n, i=i: column(fits[i], n)), dtype=float)
            chains = values.reshape(fits[i].chains, -1)
            ess = float(az.ess(chains, method="bulk")) if values.std() > 0 else 1e9
            means.append(values.mean())
            ses.append(values.std() / math.sqrt(max(ess, 1.0)))
        m = np.asarray(means)
        est = float(np.sum(p * m))
        var = float(np.sum((p * np.asarray(ses)) ** 2)
                    + np.sum((p * (m - est) * np.asarray(log_z_se)) ** 2))
        se = math.sqrt(var)
        record["estimate"][key], record["se"][key] = est, se
        record["z"][key] = (est - exact) / se if se > 0 else (0.0 if est == exact else math.inf)
        record.setdefault("capped", {})[key] = se > cap
    if "log_z" in truth:
        total = float(logsumexp(lz))
        se = math.sqrt(float(np.sum((p * np.asarray(log_z_se)) ** 2)))
        record["estimate"]["log_z"], record["se"]["log_z"] = total, se
        record["z"]["log_z"] = (total - float(truth["log_z"])) / se if se > 0 else math.inf
        record.setdefault("capped", {})["log_z"] = se > 0.15
    worst = max(abs(v) for v in record["z"].values())
    record["worst_z"] = worst
    record["match"] = worst <= 4 and not any(record["capped"].values())
    return record


def main() -> None:
    """Run the cases; print one line each; append the records."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    import sys

    sys.path.insert(0, str(HERE))
    cases = generic_cases()
    names = args.cases or list(cases)
    RESULTS.parent.mkdir(exist_ok=True)
    for name in names:
        record = run_case(cases[name], args.seed)
        with RESULTS.open("a") as out:
            out.write(json.dumps(record) + "\n")
        print(f"{name:18s} seed {args.seed}: {record['seconds']:6.1f} s, "
              f"{record['centres']} centres -> {record['groups']} groups "
              f"({record['chains_leaving_cell']} chains left their cell), worst "
              f"{record['worst_z']:6.2f} SE, {'within bounds' if record['match'] else 'MISS'}"
              + ("" if not any(record["capped"].values()) else " (an SE over its cap)"),
              flush=True)


if __name__ == "__main__":
    main()
