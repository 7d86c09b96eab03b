"""Batch tasks: files, seeds, checks and content keys (no compiling, no cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pemc_stan.batch.tasks import Task, expand_seeds, load_tasks, tasks_from
from pemc_stan.errors import OptionsError

ROOT = Path(__file__).resolve().parents[2]
NORMAL = ROOT / "models" / "normal_normal"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_toml_batch_file_gives_one_task_per_seed_with_defaults_and_relative_paths(
        tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.stan").write_text((NORMAL / "normal_normal.stan").read_text())
    spec = _write(tmp_path / "b.toml", """
[defaults]
method = "pe"
chains = 2

[[task]]
name = "nn"
model = "m/model.stan"
data = "m/data.json"
seeds = {start = 5, count = 3}
options = {n_pseudo = 3}

[[task]]
name = "ex"
model = "example:bimodal_1d"
method = "ct"
seed = 9
""")
    tasks = load_tasks(spec)
    assert [t.name for t in tasks] == ["nn-seed5", "nn-seed6", "nn-seed7", "ex"]
    assert [t.seed for t in tasks] == [5, 6, 7, 9]
    assert tasks[0].model == (tmp_path / "m" / "model.stan").resolve()
    assert tasks[0].data == (tmp_path / "m" / "data.json").resolve()
    assert tasks[0].method == "pe" and tasks[0].chains == 2 and tasks[0].options == {"n_pseudo": 3}
    assert tasks[3].method == "ct" and tasks[3].model == "example:bimodal_1d"


def test_a_json_batch_file_reads_like_toml(tmp_path: Path) -> None:
    spec = _write(tmp_path / "b.json", json.dumps(
        {"defaults": {"method": "ct"},
         "tasks": [{"name": "a", "model": "example:bimodal_1d", "seeds": [1, 2]}]}))
    assert [(t.name, t.seed, t.method) for t in load_tasks(spec)] == [
        ("a-seed1", 1, "ct"), ("a-seed2", 2, "ct")]


@pytest.mark.parametrize("text, words", [
    ("[[task]]\nname = 'a'\nmodel = 'example:bimodal_1d'\nchainz = 2\n", ["unknown field",
                                                                           "chainz"]),
    ("[[task]]\nname = 'a'\n", ["no 'model'"]),
    ("[[task]]\nname = 'a'\nmodel = 'example:bimodal_1d'\n[[task]]\nname = 'a'\n"
     "model = 'example:bimodal_1d'\n", ["name='a'", "no other task"]),
    ("[defaults]\nmethod = 'ct'\n", ["lists no tasks"]),
    ("[[task]\nname = 'a'", ["b.toml is not valid TOML"]),
    ("[[task]]\nname = 'a'\nmodel = 'example:bimodal_1d'\nseeds = 'many'\n",
     ["seeds=", "list of integers"]),
])
def test_a_bad_batch_file_is_named_with_what_is_wrong(tmp_path: Path, text: str,
                                                      words: list[str]) -> None:
    spec = _write(tmp_path / "b.toml", text)
    with pytest.raises(OptionsError) as info:
        load_tasks(spec)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("fields, words", [
    ({"name": "a b"}, ["name='a b'", "letters, digits"]),
    ({"method": "nuts-x"}, ["task 'a'", "nuts-x"]),
    ({"options": {"n_pseudo": 0}}, ["task 'a'", "n_pseudo"]),
    ({"method": "ct", "options": {"n_pseudo": 3}}, ["task 'a'", "n_pseudo"]),
    ({"chains": 0}, ["task 'a'", "chains=0"]),
    ({"sampler": {"adapt_delta": 1.5}}, ["task 'a'", "adapt_delta=1.5"]),
    ({"sampler": {"adapt_dleta": 0.9}}, ["task 'a'", "adapt_dleta"]),
])
def test_task_arguments_are_checked_naming_the_task(fields: dict[str, object],
                                                    words: list[str]) -> None:
    base: dict[str, object] = {"name": "a", "model": "example:bimodal_1d", "method": "pe"}
    with pytest.raises(OptionsError) as info:
        Task(**{**base, **fields}).validate()  # type: ignore[arg-type]
    for word in words:
        assert word in str(info.value)


def test_the_content_key_follows_exactly_what_determines_the_draws() -> None:
    base = {"name": "a", "model": "example:normal_normal", "method": "ct", "seed": 1}
    key = Task(**base).resolve().key  # type: ignore[arg-type]
    assert Task(**base).resolve().key == key  # type: ignore[arg-type]
    assert Task(**{**base, "name": "b"}).resolve().key == key  # type: ignore[arg-type]
    from pemc_stan.methods.continuous_tempering.options import ContinuousTemperingOptions

    default_rounds = ContinuousTemperingOptions().bootstrap_rounds  # spelled out: same fit
    spelled = Task(**{**base, "options": {"bootstrap_rounds": default_rounds}})  # type: ignore
    assert spelled.resolve().key == key
    changed = [{"seed": 2}, {"method": "pe"}, {"options": {"bootstrap_rounds": default_rounds + 2}},
               {"iter_sampling": 500}, {"sampler": {"adapt_delta": 0.9}},
               {"data": json.loads((NORMAL / "data.json").read_text()) | {"sigma": 2.0}}]
    keys = {Task(**{**base, **c}).resolve().key for c in changed}  # type: ignore[arg-type]
    assert key not in keys and len(keys) == len(changed)


def test_a_task_without_seed_gets_one_from_its_name() -> None:
    a = Task(name="alpha", model="example:bimodal_1d")
    assert a.effective_seed == Task(name="alpha", model="x").effective_seed
    assert a.effective_seed != Task(name="beta", model="example:bimodal_1d").effective_seed
    assert a.resolve().sampler["seed"] == a.effective_seed


def test_program_and_data_errors_come_before_anything_is_submitted(tmp_path: Path) -> None:
    from pemc_stan.errors import DataError, StanProgramError

    bad = _write(tmp_path / "bad.stan", "parameters { real x; } model { x ~ normal(0, 1) }\n")
    with pytest.raises(StanProgramError):
        Task(name="a", model=bad).resolve()
    with pytest.raises(DataError, match="tau0"):
        Task(name="a", model=NORMAL / "normal_normal.stan",
             data={"N": 1, "y": [0.0], "mu0": 0.0, "sigma": 1.0}).resolve()


def test_seed_lists_expand_and_conflicts_are_named() -> None:
    assert [t["name"] for t in expand_seeds({"name": "x", "seeds": [3, 4]})] == ["x-seed3",
                                                                                 "x-seed4"]
    with pytest.raises(OptionsError, match="not both"):
        expand_seeds({"name": "x", "seed": 1, "seeds": [3]})
    tasks = tasks_from([{"name": "x", "model": "example:bimodal_1d", "seeds": [1, 2]},
                        Task(name="y", model="example:bimodal_1d")])
    assert [t.name for t in tasks] == ["x-seed1", "x-seed2", "y"]


def _without_dask(code: str) -> subprocess.CompletedProcess[str]:
    prelude = ("import sys\n"
               "for name in ('distributed', 'dask'):\n"
               "    sys.modules[name] = None  # as if not installed\n")
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True,
                          text=True, timeout=120)


def test_without_dask_the_package_works_and_batch_names_the_extra() -> None:
    done = _without_dask("import pemc_stan\n"
                         "print(pemc_stan.transform('parameters { real x; } "
                         "model { x ~ normal(0, 1); }', method='pe')[:10])\n"
                         "try:\n"
                         "    import pemc_stan.batch\n"
                         "except ImportError as exc:\n"
                         "    print('ImportError:', exc)\n")
    assert done.returncode == 0, done.stderr
    assert "ImportError: pemc_stan.batch needs Dask" in done.stdout
    assert "pip install 'pemc-stan[distributed]'" in done.stdout


def test_without_dask_the_batch_command_names_the_extra(tmp_path: Path) -> None:
    spec = _write(tmp_path / "b.toml", "[[task]]\nname = 'a'\nmodel = 'example:bimodal_1d'\n")
    done = _without_dask("from pemc_stan.cli import main\n"
                         f"raise SystemExit(main(['batch', {str(spec)!r}]))\n")
    assert done.returncode == 1, done.stderr
    assert "pemc-stan[distributed]" in done.stderr
