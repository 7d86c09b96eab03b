"""Inputs and verdicts for fuzzing the front end (imported as ``front_end_fuzz``).

Shared by the CI fuzz test (``tests/stan/test_fuzz_front_end.py``) and the
longer benchmark run (``benchmarks/fuzz_front_end.py``), so that both try the
same inputs and judge them the same way:

- :func:`random_inputs` and :func:`mutated_inputs` are Hypothesis strategies
  of :class:`FuzzInput` -- bytes plus how they reach ``transform`` (as text
  or as a ``.stan`` file);
- :func:`attempt` runs ``pemc_stan.transform`` on one input with a time limit
  and returns an :class:`Outcome`; :func:`classify` says whether an
  exception is one of pemc-stan's own (:class:`~pemc_stan.errors.PemcStanError`)
  or a foreign one (a bug);
- :func:`fake_stanc` stands in for stanc (see the test module's docstring for
  why).
"""

from __future__ import annotations

import contextlib
import re
import signal
import stat
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

import pemc_stan
from pemc_stan.errors import PemcStanError
from pemc_stan.methods import registry

ROOT = Path(__file__).resolve().parent.parent

#: Every registered method, by canonical name.
METHODS: tuple[str, ...] = tuple(m.name for m in registry.methods())

#: Seconds one ``transform`` call may take before the input counts as a hang.
TIME_LIMIT = 5.0

#: Inputs are cut to this many bytes after each mutation (a nesting bomb of
#: thousands of levels fits easily).
MAX_BYTES = 64_000

settings.register_profile(
    "front-end-fuzz-ci",
    max_examples=60,  # each test sets its own
    deadline=None,  # the per-input limit is TIME_LIMIT, enforced by attempt()
    derandomize=True,  # the same inputs on every CI run
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.large_base_example],
)
settings.register_profile(
    "front-end-fuzz-long",  # the benchmark: seeded batches, generation only, no shrinking
    settings.get_profile("front-end-fuzz-ci"),
    derandomize=False,
    phases=[Phase.generate],
    print_blob=False,
)


# --------------------------------------------------------------------------- #
# Inputs
# --------------------------------------------------------------------------- #


def _corpus() -> tuple[tuple[str, bytes], ...]:
    files = sorted((ROOT / "tests" / "stan_corpus").glob("*.stan"))
    files += sorted((ROOT / "models").glob("*/*.stan"))
    return tuple((str(f.relative_to(ROOT)), f.read_bytes()) for f in files)


#: ``(path relative to the repository, contents)`` of every corpus program and
#: gallery model, sorted by path.
CORPUS: tuple[tuple[str, bytes], ...] = _corpus()

#: Stan keywords, types, operators and punctuation that mutations insert.
TOKENS: tuple[str, ...] = (
    # blocks
    "functions", "data", "transformed data", "parameters", "transformed parameters",
    "model", "generated quantities", "transformed", "generated", "quantities",
    # types and constraints
    "int", "real", "complex", "vector", "row_vector", "matrix", "array", "tuple", "void",
    "simplex", "ordered", "positive_ordered", "unit_vector", "sum_to_zero_vector",
    "cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix", "cov_matrix",
    "complex_vector", "complex_row_vector", "complex_matrix", "lower", "upper", "offset",
    "multiplier", "<lower=0>", "<upper=1>", "<offset=1, multiplier=2>", "[3]", "[N, K]",
    "array[2]", "tuple(real, int)",
    # statements
    "for", "in", "while", "if", "else", "break", "continue", "return", "target", "target()",
    "print", "reject", "fatal_error", "profile", "T[0, ]", "T[, 1]", "jacobian", "#include",
    "~", "+=", "-=", "*=", "/=", ".*=", "./=", "=", ";", "target +=",
    # expressions
    "(", ")", "[", "]", "{", "}", "<", ">", ",", ":", "?", "|", "'", ".", ".1", "+", "-", "*",
    "/", "%", "\\", "^", ".*", "./", ".^", "%/%", "&&", "||", "!", "==", "!=", "<=", ">=",
    "normal", "normal_lpdf(", "normal_lupdf(", "_lp", "_rng", "_lpmf", "log_sum_exp",
    "reduce_sum", "map_rect", "ode_rk45", "integrate_1d",
    # literals and identifiers
    "0", "1", "-1", "1.5", "1e309", "1e-400", ".5i", "2i", "1_000", "9" * 5000, "\"s\"", "\"",
    "pemc_x", "pemc_", "lp__", "x__", "_x", "x", "N", "K", "mu", "sigma", "theta",
    # comments and layout
    "//", "/*", "*/", "\n", "\t", "\r", "\r\n", " ",
)

#: Byte sequences that are not UTF-8 (lone continuation and lead bytes, an
#: overlong encoding, an encoded surrogate, beyond U+10FFFF).
INVALID_UTF8: tuple[bytes, ...] = (b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xc0\xaf",
                                   b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82")

#: Prefix and suffix pairs that a nesting mutation repeats around a span.
NESTINGS: tuple[tuple[str, str], ...] = (
    ("(", ")"), ("{", "}"), ("-", ""), ("!", ""), ("", "'"), ("1 + ", ""), ("", " * 2"),
    ("exp(", ")"), ("", "[1]"), ("if (1) ", ""), ("1 ? ", " : 0"), ("{", ",1}"),
    ("for (i in 1:2) ", ""), ("while (0) ", ""), ("(", ",1)"), ("[", "]"),
)

#: How the bytes reach ``transform``: decoded to a ``str`` (undecodable bytes
#: become lone surrogates, as with ``errors="surrogateescape"``), or as the
#: path of a ``.stan`` file holding them.
DELIVERIES: tuple[str, ...] = ("text", "path")


@dataclass(frozen=True)
class FuzzInput:
    """One input: the bytes, how they are passed to ``transform`` and where they came from."""

    generator: str
    source: bytes
    delivery: str
    origin: str

    def model(self, folder: Path) -> str | Path:
        """The ``model`` argument of ``transform`` (a file in ``folder`` for path delivery)."""
        if self.delivery == "path":
            path = folder / "fuzz_input.stan"
            path.write_bytes(self.source)
            return path
        return self.source.decode("utf-8", errors="surrogateescape")

    def describe(self, limit: int = 3000) -> str:
        """The input in a few lines (its bytes shown with ``repr``, cut at ``limit``)."""
        shown = repr(self.source[:limit]) + ("..." if len(self.source) > limit else "")
        return (f"generator {self.generator}, delivered as {self.delivery}, "
                f"{len(self.source)} bytes, from {self.origin}:\n{shown}")


_Mutation = Callable[[st.DrawFn, bytes], tuple[bytes, str]]


def _position(draw: st.DrawFn, data: bytes) -> int:
    return draw(st.integers(0, len(data)))


def _span(draw: st.DrawFn, data: bytes, longest: int = 200) -> tuple[int, int]:
    start = _position(draw, data)
    return start, min(len(data), start + draw(st.integers(0, longest)))


def _flip(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    if not data:
        return data, "flip (empty)"
    i = draw(st.integers(0, len(data) - 1))
    mask = draw(st.integers(1, 255))
    return data[:i] + bytes([data[i] ^ mask]) + data[i + 1:], f"flip byte {i} ^ {mask:#04x}"


def _delete(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    i, j = _span(draw, data)
    return data[:i] + data[j:], f"delete {i}:{j}"


def _duplicate(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    i, j = _span(draw, data, 60)
    at = _position(draw, data)
    times = draw(st.integers(1, 4) | st.sampled_from([50, 400, 1500]))
    return data[:at] + data[i:j] * times + data[at:], f"copy {i}:{j} x{times} to {at}"


def _splice(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    other_name, other = draw(st.sampled_from(CORPUS))
    cut, other_cut = _position(draw, data), _position(draw, other)
    return data[:cut] + other[other_cut:], f"splice at {cut} with {other_name} from {other_cut}"


def _insert_token(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    at = _position(draw, data)
    token = draw(st.sampled_from(TOKENS))
    pad = draw(st.sampled_from(["", " "]))
    return data[:at] + (pad + token + pad).encode() + data[at:], f"insert {token[:20]!r} at {at}"


def _truncate(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    at = _position(draw, data)
    return data[:at], f"truncate at {at}"


def _insert_unicode(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    at = _position(draw, data)
    text = draw(st.text(min_size=1, max_size=8)
                | st.sampled_from(["\ufeff", "\u200b", "\u202e", "\ud800", "\udfff", "\u00a0",
                                   "\u03bc", "x\u0301", "\U0001f600", "\u2028"]))
    encoded = text.encode("utf-8", errors="surrogatepass")
    return data[:at] + encoded + data[at:], f"insert {text!r} at {at}"


def _insert_nul(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    at = _position(draw, data)
    count = draw(st.integers(1, 3))
    return data[:at] + b"\x00" * count + data[at:], f"insert {count} NUL at {at}"


def _insert_invalid_utf8(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    at = _position(draw, data)
    junk = draw(st.sampled_from(INVALID_UTF8))
    return data[:at] + junk + data[at:], f"insert {junk!r} at {at}"


def _nest(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    i, j = _span(draw, data, 8)
    before, after = draw(st.sampled_from(NESTINGS))
    depth = draw(st.sampled_from([2, 20, 200, 1000, 3000]))
    nested = before.encode() * depth + data[i:j] + after.encode() * depth
    return data[:i] + nested + data[j:], f"nest {i}:{j} in {before!r}...{after!r} x{depth}"


_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9_.]*(?:[eE][+-]?[0-9]+)?i?")


def _replace_word(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    words = list(_WORD.finditer(data))
    if not words:
        return data, "replace word (none)"
    old = words[draw(st.integers(0, len(words) - 1))]
    new = draw(st.sampled_from(words).map(lambda m: m.group())
               | st.sampled_from(TOKENS).map(str.encode))
    where = old.start()
    return (data[:where] + new + data[old.end():],
            f"replace {old.group()[:20]!r} at {where} by {new[:20]!r}")


def _lines(draw: st.DrawFn, data: bytes) -> tuple[bytes, str]:
    lines = data.splitlines(keepends=True)
    if not lines:
        return data, "lines (none)"
    i, j = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
    how = draw(st.sampled_from(["delete", "copy", "swap"]))
    if how == "delete":
        del lines[i]
    elif how == "copy":
        lines.insert(j, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines), f"{how} line {i + 1}" + ("" if how == "delete" else f", {j + 1}")


#: Every mutation, by name.
MUTATIONS: dict[str, _Mutation] = {
    "flip": _flip, "delete": _delete, "duplicate": _duplicate, "splice": _splice,
    "insert_token": _insert_token, "truncate": _truncate, "unicode": _insert_unicode,
    "nul": _insert_nul, "invalid_utf8": _insert_invalid_utf8, "nest": _nest,
    "replace_word": _replace_word, "lines": _lines,
}


@st.composite
def mutated_inputs(draw: st.DrawFn) -> FuzzInput:
    """A corpus program or gallery model after one to four of :data:`MUTATIONS`."""
    name, data = draw(st.sampled_from(CORPUS))
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(sorted(MUTATIONS)))
        data, step = MUTATIONS[kind](draw, data)
        data = data[:MAX_BYTES]
        steps.append(step)
    return FuzzInput("mutated_corpus", data, draw(st.sampled_from(DELIVERIES)),
                     f"{name}, then {'; '.join(steps)}")


@st.composite
def random_inputs(draw: st.DrawFn) -> FuzzInput:
    """Random bytes."""
    data = draw(st.binary(max_size=2000))
    return FuzzInput("random_bytes", data, draw(st.sampled_from(DELIVERIES)), "random bytes")


#: The generators, by name.
GENERATORS: dict[str, st.SearchStrategy[FuzzInput]] = {
    "random_bytes": random_inputs(),
    "mutated_corpus": mutated_inputs(),
}


# --------------------------------------------------------------------------- #
# Running and judging
# --------------------------------------------------------------------------- #


class InputTimeout(BaseException):
    """Raised by the alarm in :func:`attempt` (a BaseException, so that no
    ``except Exception`` in the code under test can swallow it)."""


@dataclass(frozen=True)
class Outcome:
    """What ``transform`` did with one input.

    Attributes
    ----------
    kind
        ``"ok"`` (it returned Stan code), ``"error"`` (it raised a pemc-stan
        error), ``"foreign"`` (it raised anything else: a bug) or ``"hang"``
        (it ran out of time: a bug).
    error
        The exception's class (``"StanSyntaxError"``, ``"builtins.KeyError"``),
        ``""`` for ``ok``.
    seconds
        Wall time of the call.
    details
        The traceback for ``foreign`` and ``hang``, else the error message.
    """

    kind: str
    error: str
    seconds: float
    details: str = ""

    @property
    def is_bug(self) -> bool:
        return self.kind in ("foreign", "hang")


def classify(exc: BaseException) -> str:
    """``"error"`` for one of pemc-stan's own exceptions, ``"hang"`` for the time
    limit, ``"foreign"`` for anything else."""
    if isinstance(exc, InputTimeout):
        return "hang"
    return "error" if isinstance(exc, PemcStanError) else "foreign"


def error_name(exc: BaseException) -> str:
    """A pemc-stan error's class name; any other exception's qualified name."""
    cls = type(exc)
    if isinstance(exc, PemcStanError):
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise :class:`InputTimeout` in the body after ``seconds`` (main thread, POSIX)."""
    armed = True

    def ring(signum: int, frame: object) -> None:
        if armed:
            raise InputTimeout(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def attempt(inp: FuzzInput, method: str, time_limit: float = TIME_LIMIT) -> Outcome:
    """Run ``pemc_stan.transform`` on ``inp`` with ``method`` and judge the result.

    Warnings are silenced; ``KeyboardInterrupt`` and ``SystemExit`` pass through.
    """
    with tempfile.TemporaryDirectory(prefix="pemc-fuzz-") as folder:
        model = inp.model(Path(folder))
        started = time.perf_counter()
        try:
            with _alarm(time_limit), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code = pemc_stan.transform(model, method=method)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: B036 - judging every exception is the point
            seconds = time.perf_counter() - started
            kind = classify(exc)
            details = str(exc) if kind == "error" else "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__))
            return Outcome(kind, error_name(exc), seconds, details)
        seconds = time.perf_counter() - started
    if not isinstance(code, str):
        return Outcome("foreign", f"transform returned {type(code).__name__}", seconds)
    return Outcome("ok", "", seconds)


def failure_report(inp: FuzzInput, method: str, outcome: Outcome) -> str:
    """The message of a failed fuzz check: the method, the input and the traceback."""
    what = ("did not finish within the time limit" if outcome.kind == "hang"
            else f"raised {outcome.error}, which is not a pemc-stan error")
    return (f"transform(method={method!r}) {what} after {outcome.seconds:.2f} s on "
            f"{inp.describe()}\n\n{outcome.details}")


# --------------------------------------------------------------------------- #
# stanc
# --------------------------------------------------------------------------- #


@contextlib.contextmanager
def fake_stanc() -> Iterator[Path]:
    """Make pemc-stan run a stand-in for stanc that accepts every program.

    ``pemc_stan.backend.runtime.stanc_path`` is patched to a shell script that
    exits 0 without output, so ``run_stanc`` still writes the program to a
    file and starts a process, but every program reaches pemc-stan's parser,
    analysis and transformation.
    """
    with tempfile.TemporaryDirectory(prefix="pemc-fake-stanc-") as folder:
        script = Path(folder) / "stanc"
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        with mock.patch("pemc_stan.backend.runtime.stanc_path", return_value=script):
            yield script
