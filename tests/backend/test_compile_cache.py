"""The model cache: an executable is reused only when it proves itself (compiled)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from pemc_stan.backend.compile import RECORD, compile_model

pytestmark = pytest.mark.compiled

PROGRAM = "parameters { real y; } model { y ~ normal(0, 1); }  // cache-proof test\n"


@pytest.mark.parametrize("damage", ["empty", "truncated", "no_record_and_empty"])
def test_a_broken_cached_executable_is_rebuilt(tmp_path: Path, damage: str,
                                               cmdstan_installation: object,
                                               caplog: pytest.LogCaptureFixture) -> None:
    model = compile_model(PROGRAM, name="cacheproof", cache_dir=tmp_path)
    exe = Path(model.exe_file)
    record = exe.parent / RECORD
    assert json.loads(record.read_text())["size"] == exe.stat().st_size
    if damage == "truncated":
        data = exe.read_bytes()
        exe.write_bytes(data[:100000])
    else:
        exe.write_bytes(b"")
        if damage == "no_record_and_empty":
            record.unlink()
    with caplog.at_level(logging.WARNING, logger="pemc_stan"):
        again = compile_model(PROGRAM, name="cacheproof", cache_dir=tmp_path)
    assert "compiling it again" in caplog.text
    fit = again.sample(chains=1, iter_warmup=100, iter_sampling=100, seed=1,
                       show_progress=False)
    assert fit.draws().shape[0] == 100
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pemc_stan"):
        compile_model(PROGRAM, name="cacheproof", cache_dir=tmp_path)  # now it is reused
    assert "compiling it again" not in caplog.text


def test_an_executable_from_before_records_proves_itself(tmp_path: Path,
                                                         cmdstan_installation: object,
                                                         caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    model = compile_model(PROGRAM, name="cacheproof", cache_dir=tmp_path)
    record = Path(model.exe_file).parent / RECORD
    record.unlink()
    with caplog.at_level(logging.WARNING, logger="pemc_stan"):
        compile_model(PROGRAM, name="cacheproof", cache_dir=tmp_path)
    assert "compiling it again" not in caplog.text and record.is_file()


def test_the_same_program_in_another_file_reuses_the_executable(
        tmp_path: Path, cmdstan_installation: object, caplog: pytest.LogCaptureFixture) -> None:
    from pemc_stan.backend.compile import message_file_name

    cache = tmp_path / "cache"
    one, two = tmp_path / "one.stan", tmp_path / "two.stan"
    one.write_text(PROGRAM)
    two.write_text(PROGRAM)
    first = compile_model(one, cache_dir=cache)
    with caplog.at_level(logging.INFO, logger="pemc_stan"):
        second = compile_model(two, cache_dir=cache)
    assert "compiling two" not in caplog.text and "reusing the executable of one-" in caplog.text
    assert Path(second.exe_file).name == "two"
    assert Path(second.exe_file).stat().st_ino == Path(first.exe_file).stat().st_ino
    assert message_file_name(second) == "one.stan"
    fit = second.sample(chains=1, iter_warmup=50, iter_sampling=50, seed=1, show_progress=False)
    assert fit.draws().shape[0] == 50
