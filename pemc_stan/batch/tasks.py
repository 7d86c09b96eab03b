"""Batch tasks: one fit each (model × data × method × options × seed), checked on the client.

A :class:`Task` names what to fit; :meth:`Task.resolve` reads the program and
the data *on the client* (so workers need no shared file system) and checks
every argument before anything is submitted, returning a :class:`ResolvedTask`
that carries the program text, the checked data and a content key.  The key
(a SHA-256 of everything that determines the draws) is written next to the
task's results, so that a rerun of the batch skips exactly the tasks whose
results are complete and were made from the same inputs.

A batch file is TOML or JSON::

    [defaults]              # any task field; a task's own value wins
    method = "ct"
    chains = 4

    [[task]]
    name = "normal"
    model = "normal.stan"   # relative to the batch file; or example:NAME
    data = "normal.json"
    seeds = [1, 2, 3]       # one task per seed: normal-seed1, normal-seed2, ...
    options = {bootstrap_rounds = 2}
    sampler = {adapt_delta = 0.9}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pemc_stan.errors import OptionsError
from pemc_stan.methods import registry

__all__ = ["Task", "ResolvedTask", "load_tasks", "expand_seeds", "check_unique_names"]

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _sampler_defaults() -> dict[str, Any]:
    """The defaults of :class:`pemc_stan.run.pipeline.SamplerArgs` (one home for them)."""
    from pemc_stan.run.pipeline import SamplerArgs

    return {f.name: f.default for f in dataclasses.fields(SamplerArgs)
            if f.name in ("chains", "iter_warmup", "iter_sampling")}


def _canonical(value: Any) -> Any:
    """``value`` as plain JSON types (NumPy arrays to lists), for hashing and records."""
    from pemc_stan.output.json_values import json_safe

    return json_safe(value)


@dataclass(frozen=True)
class Task:
    """One fit of a batch.

    Attributes
    ----------
    name
        The task's name: letters, digits, ``_ . -``; also its output folder's name.
    model
        A ``.stan`` path, ``example:NAME`` or Stan program text.
    data
        A data dict, a JSON path, or None (an example's own data when ``model``
        is an example).
    method
        A registered method's name or alias (default: the registry's default).
    options
        Fields of the method's options dataclass.
    seed
        The seed of the fit; None derives one from the name (CRC-32), so that a
        rerun repeats the task.
    chains, iter_warmup, iter_sampling
        As :func:`pemc_stan.sample` (None: its defaults).
    sampler
        Further ``CmdStanModel.sample`` arguments (``adapt_delta``, ...).
    """

    name: str
    model: str | Path
    data: Mapping[str, Any] | str | Path | None = None
    method: str = registry.DEFAULT_METHOD
    options: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    chains: int | None = None
    iter_warmup: int | None = None
    iter_sampling: int | None = None
    sampler: Mapping[str, Any] = field(default_factory=dict)

    def validate(self) -> Task:
        """Check the name, the method, its options and the sampler arguments.

        Raises
        ------
        OptionsError
            Naming the task, the argument, the value and what was expected.
        """
        self._settle()
        return self

    def _settle(self) -> tuple[registry.Method, Any]:
        """The task's method and validated options, after checking every argument."""
        from pemc_stan.run.pipeline import SamplerArgs

        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise OptionsError("name", self.name, "a task name of letters, digits, '_', '.' "
                               "and '-' (it names the task's output folder)")
        try:
            spec = registry.get(self.method)
            options = spec.build_options(**dict(self.options))
            SamplerArgs(**self.sampler_args(), extra=dict(self.sampler)).validate()
        except OptionsError as exc:
            raise OptionsError(exc.argument, exc.value, exc.expected,
                               message=f"task {self.name!r}: {exc}") from None
        return spec, options

    def sampler_args(self) -> dict[str, Any]:
        """``chains``, ``iter_warmup``, ``iter_sampling`` (the sampler's defaults where not
        given) and the seed."""
        defaults = _sampler_defaults()
        given = {"chains": self.chains, "iter_warmup": self.iter_warmup,
                 "iter_sampling": self.iter_sampling}
        args = {k: defaults[k] if v is None else v for k, v in given.items()}
        args["seed"] = self.effective_seed
        return args

    @property
    def effective_seed(self) -> int:
        """``seed``, or a seed derived from the name."""
        if self.seed is not None:
            return int(self.seed)
        return zlib.crc32(self.name.encode()) % (2**31)

    def resolve(self, programs: dict[str, Any] | None = None) -> ResolvedTask:
        """Read the program and data here, check them, and compute the content key.

        ``programs`` memoises parsed programs by path or text across the tasks of
        a batch (a batch of 300 seeds parses its program once).

        Raises
        ------
        OptionsError
            For invalid arguments (see :meth:`validate`).
        StanProgramError, DataError, OSError
            For an unreadable or invalid program or data.
        """
        from pemc_stan.stan.examples import example, is_example
        from pemc_stan.stan.inputs import read_data, read_program

        spec, options = self._settle()
        model: Any = self.model
        data: Any = self.data
        label = str(model) if isinstance(model, Path) or (
            isinstance(model, str) and "\n" not in model and len(model) < 4096) else "<text>"
        if isinstance(model, str) and is_example(model):
            model, default_data = example(model)
            if data is None:
                data = default_data
        memo_key = str(model)
        if programs is not None and memo_key in programs:
            program = programs[memo_key]
        else:
            program = read_program(model)
            if programs is not None:
                programs[memo_key] = program
        # program errors before submitting; the generated program is part of the key, so a
        # pemc-stan that writes another program for the same options reruns the task
        transformed = spec.transform_program(program, options)
        values = read_data(program, data)
        data_label = str(data) if isinstance(data, (str, Path)) else (
            None if data is None else "<dict>")
        sampler = self.sampler_args()
        record = {"program": program.text, "generated": transformed.stan_code,
                  "data": _canonical(values), "method": spec.name,
                  "options": _canonical(options), "sampler": sampler,
                  "extra": _canonical(dict(self.sampler))}
        key = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
        return ResolvedTask(name=self.name, program_text=program.text,
                            model_name=program.name, model_label=label, data=values,
                            data_label=data_label, method=spec.name,
                            options=dict(self.options), sampler=sampler,
                            extra=dict(self.sampler), key=key)


@dataclass(frozen=True)
class ResolvedTask:
    """A checked task as shipped to a worker (no paths: text and values only).

    Attributes
    ----------
    name, method, options, extra
        As :class:`Task` (``method`` canonical).
    program_text, model_name
        The Stan program and its name.
    model_label, data_label
        Where the model and data came from (recorded in ``estimates.json``).
    data
        The checked data values.
    sampler
        ``chains``, ``iter_warmup``, ``iter_sampling`` and ``seed``.
    key
        SHA-256 of everything that determines the task's draws (including the
        generated program).
    """

    name: str
    program_text: str
    model_name: str
    model_label: str
    data: dict[str, Any]
    data_label: str | None
    method: str
    options: dict[str, Any]
    sampler: dict[str, Any]
    extra: dict[str, Any]
    key: str


def expand_seeds(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One task dict per seed of an entry with ``seeds`` (a list, or ``{start, count}``).

    Raises
    ------
    OptionsError
        For ``seeds`` that are not a list of integers or ``{start, count}``,
        or an entry with both ``seed`` and ``seeds``.
    """
    entry = dict(entry)
    if "seeds" not in entry:
        return [entry]
    seeds: Any = entry.pop("seeds")
    if "seed" in entry:
        raise OptionsError("seeds", seeds, "either seed or seeds in a task, not both")
    if isinstance(seeds, Mapping):
        try:
            start, count = int(seeds["start"]), int(seeds["count"])
        except (KeyError, TypeError, ValueError):
            raise OptionsError("seeds", seeds, "a list of integers or {start = S, count = N}"
                               ) from None
        seeds = list(range(start, start + count))
    if not isinstance(seeds, list) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise OptionsError("seeds", seeds, "a non-empty list of integers or "
                           "{start = S, count = N}")
    base = str(entry.get("name", ""))
    return [{**entry, "seed": s, "name": f"{base}-seed{s}"} for s in seeds]


def check_unique_names(tasks: Sequence[Task]) -> None:
    """Raise when two tasks share a name (they would share an output folder).

    Raises
    ------
    OptionsError
        Naming the repeated name.
    """
    seen: set[str] = set()
    for t in tasks:
        if t.name in seen:
            raise OptionsError("name", t.name, "a name no other task of the batch has (it "
                               "names the task's output folder)")
        seen.add(t.name)


_TASK_FIELDS = {f.name for f in dataclasses.fields(Task)}


def _task_from(entry: Mapping[str, Any], base: Path, where: str) -> Task:
    unknown = sorted(set(entry) - _TASK_FIELDS)
    if unknown:
        raise OptionsError(unknown[0], entry[unknown[0]],
                           f"a task field ({', '.join(sorted(_TASK_FIELDS))})",
                           message=f"{where}: unknown field {unknown[0]!r}; a task has "
                                   f"{', '.join(sorted(_TASK_FIELDS))}")
    if "name" not in entry or "model" not in entry:
        missing = "name" if "name" not in entry else "model"
        raise OptionsError(missing, None, "a value", message=f"{where}: the task has no "
                           f"{missing!r}; give every task a name and a model")
    values = dict(entry)
    model = str(values["model"])
    from pemc_stan.stan.examples import is_example

    if isinstance(values["model"], str) and not is_example(model) and "\n" not in model \
            and "{" not in model:  # a path (program text has braces)
        values["model"] = (base / model).resolve()
    if isinstance(values.get("data"), str):
        values["data"] = (base / values["data"]).resolve()
    return Task(**values)


def load_tasks(path: str | Path) -> list[Task]:
    """Read a batch file (TOML ``.toml`` or JSON ``.json``); see the module docstring.

    Relative ``model`` and ``data`` paths are relative to the batch file.

    Raises
    ------
    OSError
        If the file cannot be read.
    OptionsError
        For a file that is not valid TOML/JSON, has no tasks, unknown fields, or
        repeated task names; each message names the file and the task.
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix.lower() == ".json":
            spec = json.loads(text)
        elif sys.version_info >= (3, 11):
            import tomllib

            spec = tomllib.loads(text)
        else:  # pragma: no cover - Python 3.10
            raise OptionsError("batch file", str(p), "a .json file",
                               message=f"{p}: TOML batch files need Python 3.11 or later; "
                                       "write the batch as JSON (same fields)")
    except ValueError as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise OptionsError("batch file", str(p), "valid TOML or JSON",
                           message=f"{p} is not valid {'JSON' if p.suffix == '.json' else 'TOML'}"
                                   f": {exc}") from None
    entries = spec.get("task", spec.get("tasks")) if isinstance(spec, Mapping) else spec
    defaults = spec.get("defaults", {}) if isinstance(spec, Mapping) else {}
    if not isinstance(entries, list) or not entries:
        raise OptionsError("task", entries, "a list of tasks",
                           message=f"{p} lists no tasks; add [[task]] tables (TOML) or a "
                                   "\"tasks\" list (JSON)")
    tasks: list[Task] = []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, Mapping):
            raise OptionsError("task", entry, "a table of task fields",
                               message=f"{p}: task {i} is not a table of fields")
        merged = {**defaults, **entry}
        for one in expand_seeds(merged):
            tasks.append(_task_from(one, p.parent, f"{p}: task {i} ({one.get('name', '?')})"))
    check_unique_names(tasks)
    return tasks


def tasks_from(items: Iterable[Task | Mapping[str, Any]]) -> list[Task]:
    """Tasks from :class:`Task` objects or dicts of their fields (``seeds`` expanded).

    Raises
    ------
    OptionsError
        For unknown fields or repeated names.
    """
    tasks: list[Task] = []
    for i, item in enumerate(items, 1):
        if isinstance(item, Task):
            tasks.append(item)
            continue
        for one in expand_seeds(item):
            tasks.append(_task_from(one, Path.cwd(), f"task {i} ({one.get('name', '?')})"))
    check_unique_names(tasks)
    return tasks
