"""The models gallery (``models/``): every example is complete and consistent.

Fast (nothing compiles): for every gallery folder

- a README.md and an entry in ``models/README.md``;
- every ``.stan`` program parses with the front end and transforms with the
  pseudo-extended method (and continuous tempering once it exists);
- data files (``*data.json``) declare every variable of the data block;
- generators (``generate_data.py``) that are fast rewrite the committed JSON
  files exactly when run in a scratch copy of the folder;

plus independent checks of the exact answers the new examples ship
(2-D quadrature for the double well) and of the shapes the generators promise.
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import pemc_stan
from pemc_stan.stan import ast
from pemc_stan.stan.parser import parse
from pemc_stan.stan.printer import print_program

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
FOLDERS = sorted(p for p in MODELS.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
PROGRAMS = sorted(p for folder in FOLDERS for p in folder.glob("*.stan"))

#: Generators too slow for the unit tests (reason shown in the skip message).
SLOW_GENERATORS = {
    "boltzmann_machine": "enumerates all 2^28 states of the Boltzmann machine "
                         "(~10 s of one core: too slow for a unit test)",
}


def _rel(path: Path) -> str:
    return str(path.relative_to(MODELS))


def _load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gallery_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _data_names(program: ast.Program) -> list[str]:
    if program.data is None:
        return []
    return [n for s in program.data.stmts if isinstance(s, ast.VarDecl) for n in s.names]


def _data_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*data.json"))


def test_gallery_is_not_empty() -> None:
    names = {f.name for f in FOLDERS}
    assert {"bimodal_1d", "gaussian_mixture_20", "normal_normal", "double_well",
            "horseshoe_logistic", "radon_hierarchical"} <= names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_folder_has_readme_program_and_index_entry(folder: Path) -> None:
    readme = folder / "README.md"
    assert readme.is_file(), f"{_rel(folder)} has no README.md"
    assert len(readme.read_text().split()) >= 30, f"{_rel(readme)} says too little"
    assert list(folder.glob("*.stan")), f"{_rel(folder)} has no .stan program"
    index = (MODELS / "README.md").read_text()
    assert f"]({folder.name}/)" in index, f"models/README.md does not link {folder.name}/"


@pytest.mark.parametrize("stan_file", PROGRAMS, ids=_rel)
def test_program_parses_and_transforms_pe(stan_file: Path) -> None:
    program = parse(stan_file.read_text(), filename=stan_file.name)
    assert program.parameters is not None and program.parameters.stmts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # heavy-tailed prior / improper-q advice is expected
        code = pemc_stan.transform(stan_file, method="pe", n_pseudo=2)
    assert "pemc_log_density" in code
    parse(code)  # the transformed program is valid Stan (stanc accepts it)


@pytest.mark.parametrize("stan_file", PROGRAMS, ids=_rel)
def test_program_transforms_ct(stan_file: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = pemc_stan.transform(stan_file, method="ct")
    parse(code)


@pytest.mark.parametrize("stan_file", PROGRAMS, ids=_rel)
def test_data_files_declare_every_data_variable(stan_file: Path) -> None:
    program = parse(stan_file.read_text(), filename=stan_file.name)
    names = _data_names(program)
    if not names:
        return
    files = _data_files(stan_file.parent)
    # a folder may hold data for several programs: use the files that mention any name
    matching = [f for f in files if set(json.loads(f.read_text())) & set(names)]
    assert matching, f"no *data.json in {_rel(stan_file.parent)} for {stan_file.name}"
    for f in matching:
        data = json.loads(f.read_text())
        missing = [n for n in names if n not in data]
        assert not missing, f"{_rel(f)} lacks data {missing} of {stan_file.name}"


GENERATORS = sorted(f / "generate_data.py" for f in FOLDERS if (f / "generate_data.py").is_file())


@pytest.mark.parametrize("generator", GENERATORS, ids=lambda p: p.parent.name)
def test_generator_reproduces_committed_json(generator: Path, tmp_path: Path) -> None:
    folder = generator.parent
    if folder.name in SLOW_GENERATORS:
        pytest.skip(f"{folder.name}: {SLOW_GENERATORS[folder.name]}")
    scratch = tmp_path / folder.name
    shutil.copytree(folder, scratch)
    committed = {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}
    assert committed, f"{_rel(folder)} has a generator but no JSON output"
    for name in committed:
        (scratch / name).unlink()
    subprocess.run([sys.executable, "generate_data.py"], cwd=scratch, check=True,
                   capture_output=True, timeout=120)
    for name, value in committed.items():
        out = scratch / name
        assert out.is_file(), f"generate_data.py did not write {name}"
        regenerated = json.loads(out.read_text())
        if name.endswith("data.json"):  # data: bit for bit
            assert regenerated == value, f"{_rel(folder / name)} differs from its generator"
        else:  # derived answers (quadrature, linear algebra): to 1e-12 across library builds
            _assert_json_close(regenerated, value, f"{_rel(folder / name)}")


def _assert_json_close(got: Any, want: Any, where: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys differ"
        for key in want:
            _assert_json_close(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: lengths differ"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_json_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-14), f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


# --------------------------------------------------------------------------- #
# exact answers and generator contracts of the new examples
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("scenario", ["a", "b"])
def test_gaussian_mixture_box_does_not_cut_the_mixture(scenario: str) -> None:
    """The exact moments are those of the program's target: the mixture on its box.

    ``x`` is declared on the box [box_lower, box_upper]^2, so the program samples
    the mixture truncated to it.  The truncated moments (products of 1-D
    truncated normals per component) must equal the committed untruncated
    ones; a box ending at 10 in scenario (b) cut a fifth of the mass of the
    components near (8.5, 9.5) and moved E[X2^2] by about 0.8.
    """
    from scipy import stats

    folder = MODELS / "gaussian_mixture_20"
    data = json.loads((folder / f"scenario_{scenario}.data.json").read_text())
    exact = json.loads((folder / "exact_moments.json").read_text())[scenario]
    mu = np.asarray(data["mu"], dtype=float)
    w = np.asarray(data["w"], dtype=float)
    sd = np.asarray(data["sigma"], dtype=float)[:, None]
    lo, hi = (data["box_lower"] - mu) / sd, (data["box_upper"] - mu) / sd
    mass = stats.norm.cdf(hi) - stats.norm.cdf(lo)  # per component and coordinate
    m1 = stats.truncnorm.mean(lo, hi, loc=mu, scale=sd)
    m2 = stats.truncnorm.var(lo, hi, loc=mu, scale=sd) + m1**2
    wk = w * mass.prod(axis=1)  # component weights inside the box
    wk /= wk.sum()
    got = {"E[X1]": wk @ m1[:, 0], "E[X2]": wk @ m1[:, 1],
           "E[X1^2]": wk @ m2[:, 0], "E[X2^2]": wk @ m2[:, 1]}
    for name, value in got.items():
        assert value == pytest.approx(exact[name], abs=1e-4), name


def test_double_well_ground_truth_by_2d_quadrature() -> None:
    """log Z, well mass and moments agree with a 2-D quadrature of the joint density.

    Independent of the generator's per-coordinate adaptive quadrature: the
    trapezoidal rule on a 3001 x 3001 grid over [-3, 3]^2 (the integrand is
    smooth and below exp(-600) of its maximum at the edges, where the rule
    converges geometrically).
    """
    folder = MODELS / "double_well"
    gen = _load_module(folder / "generate_data.py")
    data = json.loads((folder / "double_well.data.json").read_text())
    truth = json.loads((folder / "ground_truth.json").read_text())
    kappa, h = data["kappa"], np.asarray(data["h"], dtype=float)
    assert data["D"] == 2
    grid = np.linspace(-3.0, 3.0, 3001)
    step = grid[1] - grid[0]
    x1, x2 = np.meshgrid(grid, grid, indexing="ij")
    log_f = gen.log_density(np.stack([x1, x2], axis=-1), kappa, h)
    shift = float(log_f.max())
    f = np.exp(log_f - shift)
    z = f.sum() * step**2  # the integrand vanishes at the edges: trapezoid = plain sum
    assert math.log(z) + shift == pytest.approx(truth["log_z"], abs=1e-9)
    # half-line integrals: the trapezoid gives the grid point at 0 half its weight
    right1 = (x1 > 0) + 0.5 * (x1 == 0)
    right2 = (x2 > 0) + 0.5 * (x2 == 0)
    assert (f * right1).sum() * step**2 / z == pytest.approx(truth["p_positive"][0], abs=1e-9)
    assert (f * right2).sum() * step**2 / z == pytest.approx(truth["p_positive"][1], abs=1e-9)
    assert (f * x2).sum() * step**2 / z == pytest.approx(truth["mean"][1], abs=1e-9)
    assert (f * x1).sum() * step**2 / z == pytest.approx(truth["mean"][0], abs=1e-9)
    assert (f * x1**2).sum() * step**2 / z == pytest.approx(truth["second_moment"][0], abs=1e-9)
    # the tilt makes the wells unequal: the well masses are not 1/2
    assert abs(truth["p_positive"][0] - 0.5) > 0.1 and abs(truth["p_positive"][1] - 0.5) > 0.1


def test_double_well_python_density_matches_stan_program_text() -> None:
    """The generator's density is the one the Stan program states (same model block)."""
    program = parse((MODELS / "double_well" / "double_well.stan").read_text())
    text = print_program(program)
    assert "-kappa * dot_self(square(x) - 1) + dot_product(h, x)" in text
    gen = _load_module(MODELS / "double_well" / "generate_data.py")
    x = np.array([[0.3, -1.2], [1.0, 1.0]])
    expected = -10.0 * ((x**2 - 1) ** 2).sum(axis=1) + x @ np.array([0.5, -0.25])
    np.testing.assert_allclose(gen.log_density(x, 10.0, [0.5, -0.25]), expected, rtol=1e-15)


def test_horseshoe_generator_shapes_and_correlated_pairs() -> None:
    gen = _load_module(MODELS / "horseshoe_logistic" / "generate_data.py")
    data = gen.make_data(gen.SEED)
    x = np.asarray(data["X"] + data["X_test"])
    assert np.asarray(data["X"]).shape == (data["N"], data["D"])
    assert np.asarray(data["X_test"]).shape == (data["N_test"], data["D"])
    assert data["N"] + data["N_test"] == 100 and data["N_test"] == 20
    assert set(data["y"]) | set(data["y_test"]) <= {0, 1}
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(x.std(axis=0), 1.0, atol=1e-5)
    corr = np.corrcoef(x, rowvar=False)
    # the duplicated predictors are strongly correlated; the others are not
    assert corr[0, 3] > 0.9 and corr[1, 4] > 0.9
    off = np.abs(corr[np.triu_indices(data["D"], 1)])
    assert np.sum(off > 0.9) == 2
    assert data["scale_global"] == pytest.approx(3 / 47 * 2 / math.sqrt(80))
    assert gen.make_data(gen.SEED) == data  # deterministic
    assert gen.make_data(gen.SEED + 1) != data
    with pytest.raises(ValueError, match="seed"):
        gen.make_data(-1)


def test_radon_generator_shapes() -> None:
    gen = _load_module(MODELS / "radon_hierarchical" / "generate_data.py")
    data = gen.make_data(gen.SEED)
    assert (data["N"], data["J"]) == (919, 85)
    county = np.asarray(data["county"])
    sizes = np.bincount(county, minlength=86)[1:]
    assert sizes.sum() == 919 and sizes.min() >= 1 and sizes.max() > 5 * np.median(sizes)
    x = np.asarray(data["x"])
    assert x.shape == (919, 2) and set(np.unique(x[:, 0])) <= {0.0, 1.0}
    # log uranium is a county-level covariate: constant within each county
    for j in (1, 2, 3):
        assert np.ptp(x[county == j, 1]) == 0.0
    assert len(data["y"]) == 919
    program = parse((MODELS / "radon_hierarchical" / "radon_hierarchical.stan").read_text())
    n_params = 0
    for stmt in program.parameters.stmts:  # type: ignore[union-attr]
        assert isinstance(stmt, ast.VarDecl)
        n_params += len(stmt.names) * (data["J"] if stmt.names == ("alpha",)
                                       else 2 if stmt.names == ("beta",) else 1)
    assert n_params == 92  # the paper's count: 5 scalars, 85 intercepts, 2 coefficients
    with pytest.raises(ValueError, match="seed"):
        gen.make_data(-1)
