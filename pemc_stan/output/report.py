"""``report.html``: one self-contained page summarising a run folder.

The report is built ONLY from the files of a run folder, so that ``pemc-stan
report RUN_DIR`` rebuilds it from a finished run:

``<model>.nc``
    the InferenceData (resampled draws, weights, temperatures, attributes);
``estimates.json``
    the verdict with its reasons and remedies, the weighted expectations, log Z,
    the diagnostics, the method's options and the sampler's settings;
``stan/<model>.stan`` and ``stan/<model>_<method>.stan``
    the user's program and the program pemc-stan generated from it
    (written by :func:`~pemc_stan.output.run_record.write_run_sources`, which
    :func:`~pemc_stan.output.writers.save_fit` calls);
``modes.json``
    the modes the pilot's search found, in the parameters' own (constrained)
    space (also written by :func:`~pemc_stan.output.run_record.write_run_sources`;
    absent without a search).

:func:`write_report` draws the pictures (:mod:`pemc_stan.output.figures`) into
``plots/`` and writes ``report.html``: the verdict (ok/suspect, prominent), its
reasons and remedies and the advice, the summary table, log Z with its error bar
and the estimates it came from, the diagnostics, the pictures (embedded as
base64 data URIs), the pilot's modes, the settings, and the generated Stan
program with the lines taken over verbatim from the user's program highlighted.
The page loads nothing: inline CSS, no scripts, no network.  Reading the folder
(:func:`~pemc_stan.output.run_record.read_run`) is in :mod:`pemc_stan.output.run_record`.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import logging
import math
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pemc_stan.errors import OutputPathError
from pemc_stan.output.cost import cost_line
from pemc_stan.output.diagnostics import ESS_MIN, RHAT_MAX
from pemc_stan.output.figures import (
    MAX_PANELS,
    PLOTS_DIR,
    WrittenFigure,
    log_z_estimates,
    write_figures,
)
from pemc_stan.output.folder import write_text_atomically
from pemc_stan.output.run_record import MODES_NAME, RunRecord, read_run

logger = logging.getLogger(__name__)

__all__ = ["REPORT_NAME", "user_lines", "summary_frame", "build_html", "write_report",
           "png_payloads"]

#: The report's file name inside the run folder.
REPORT_NAME = "report.html"
#: At most this many rows in the report's summary table.
MAX_TABLE_ROWS = 100


# ---------------------------------------------------------------------- content
def _code(line: str) -> str:
    """A line's code without its ``//`` comment and without whitespace."""
    return re.sub(r"\s+", "", line.split("//", 1)[0])


def _statements(program: str) -> set[str]:
    """The program's statements and block openings, without comments and whitespace
    (``real x;``, ``model {``, ``x ~ normal(0, 1);``), however they are laid out."""
    code = re.sub(r"/\*.*?\*/", "", program, flags=re.S)
    code = "".join(map(_code, code.splitlines()))
    return {f for f in re.findall(r"[^;{}]*[;{}]", code) if re.search(r"[A-Za-z0-9]", f)}


def _increments(statements: set[str]) -> set[str]:
    """What the user's statements add to the target: ``E;`` of ``target += E;``, and
    ``dist_lpdf(y | args);`` (or ``_lpmf``) of ``y ~ dist(args);``."""
    out = {s[len("target+="):] for s in statements if s.startswith("target+=")}
    for s in statements:
        m = re.fullmatch(r"([^~]+)~([A-Za-z_]\w*)\((.*)\);", s)
        if m is None:
            continue
        variate, dist, args = m.groups()
        for suffix in ("_lpdf", "_lpmf"):
            out.add(f"{dist}{suffix}({variate}{'|' + args if args else ''});")
    return out


def user_lines(generated: str, original: str) -> list[bool]:
    """Which lines of the generated program are the user's own.

    A generated line is the user's when its code (without the ``//`` comment,
    whitespace ignored) is a statement or block opening of the original program
    (however that was laid out), or when it accumulates (``pemc_lp += E;``) what a
    user's ``target += E;`` or ``y ~ dist(...);`` adds.  Lines without a letter or
    digit (braces) never count.

    Returns
    -------
    list of bool
        One flag per line of ``generated``.

    Raises
    ------
    Nothing.
    """
    own = _statements(original)
    increments = _increments(own)
    flags = []
    for line in generated.splitlines():
        c = _code(line)
        if not re.search(r"[A-Za-z0-9]", c):
            flags.append(False)
            continue
        m = re.fullmatch(r"[A-Za-z_]\w*\+=(.+)", c)
        flags.append(c in own or (m is not None and m.group(1) in increments))
    return flags


def _stan_label(label: str) -> str:
    """ArviZ's ``L[2, 1]`` as CmdStan's ``L[2,1]``."""
    return re.sub(r",\s+", ",", str(label))


def summary_frame(record: RunRecord) -> pd.DataFrame:
    """The summary table: ``summary.csv`` (the table ``pemc-stan sample`` printed) when the
    folder holds it, else weighted means with MCSE and ESS (``estimates.json``) and the
    resampled draws' sd, 90% interval, bulk/tail ESS and R-hat (ArviZ, from the NetCDF).

    Raises
    ------
    Nothing beyond ArviZ's errors.
    """
    if record.summary is not None:
        return record.summary
    import arviz as az

    names = record.parameter_names()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = az.summary(record.idata, var_names=names or None, kind="all",
                           stat_focus="mean", hdi_prob=0.9)
    stats.index = pd.Index([_stan_label(i) for i in stats.index])
    expectations = record.estimates.get("expectations") or {}
    index = list(stats.index)
    for c in expectations:
        if c not in index:
            index.append(str(c))
    table = pd.DataFrame(index=pd.Index(index, name="parameter"))

    def weighted(key: str) -> list[float]:
        out = []
        for c in index:
            value = (expectations.get(c) or {}).get(key)
            out.append(float(value) if isinstance(value, (int, float)) else math.nan)
        return out

    if expectations:
        table["mean"] = weighted("mean")
        table["mcse"] = weighted("mcse")
        table["ess_mean"] = weighted("ess")
        table["khat"] = weighted("khat")
    for col in ("sd", "hdi_5%", "hdi_95%", "ess_bulk", "ess_tail", "r_hat"):
        if col in stats.columns:
            table[col] = stats[col].reindex(pd.Index(index))
        if expectations:  # rows ArviZ was not asked for: the TPs' and GQs' own figures
            own = pd.Series(weighted(col), index=table.index)
            table[col] = table[col].fillna(own) if col in table.columns else own
    return table


# ---------------------------------------------------------------------- HTML
_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       color: #1d1d1f; background: #f6f7f9; line-height: 1.45; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5em 2em 4em; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin-bottom: 0.3em; }
.subtitle { color: #555; margin-top: 0; }
.verdict { border-radius: 8px; padding: 1em 1.4em; margin: 1.2em 0; border: 2px solid; }
.verdict .status { font-size: 2em; font-weight: 700; letter-spacing: 0.02em; }
.verdict.ok { background: #e8f5ec; border-color: #1b7f3b; color: #114d25; }
.verdict.suspect { background: #fdecea; border-color: #b3261e; color: #6e1712; }
.verdict.unknown { background: #f1f1f1; border-color: #777; color: #333; }
.reason { margin: 0.7em 0; }
.reason .name { font-family: monospace; font-weight: 700; }
.remedy { display: block; margin-left: 1.2em; }
.checks span { display: inline-block; margin: 0.15em 0.3em 0.15em 0; padding: 0.05em 0.5em;
               border-radius: 4px; font-family: monospace; font-size: 0.9em; }
.pass { background: #d7efdd; } .fail { background: #f7c9c4; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f2f5; } td.key, th.key { text-align: left; font-family: monospace; }
td.text { text-align: left; }
td.bad { background: #f7c9c4; font-weight: 700; }
.logz { font-size: 1.3em; }
.bar { position: relative; height: 1.4em; background: #f0f2f5; border-radius: 4px;
       max-width: 600px; margin: 0.5em 0; }
.bar .ci { position: absolute; top: 0.35em; height: 0.7em; background: #6b8fd6;
           border-radius: 3px; }
.bar .pt { position: absolute; top: 0.1em; width: 3px; height: 1.2em; background: #b3261e; }
.barscale { max-width: 600px; display: flex; justify-content: space-between; color: #666;
            font-size: 0.8em; }
figure { margin: 1.2em 0; }
figure img { max-width: 100%; border: 1px solid #e3e3e3; }
figcaption { color: #444; font-size: 0.92em; }
pre.code { background: #fafafa; border: 1px solid #ddd; padding: 0.6em 0; overflow-x: auto;
           font-size: 0.85em; line-height: 1.35; }
pre.code span.line { display: block; padding: 0 0.8em; white-space: pre; }
pre.code span.user { background: #fff3bf; box-shadow: inset 4px 0 0 #e0a800; }
pre.code span.no { display: inline-block; width: 3.2em; color: #999; user-select: none; }
.legend span.user { background: #fff3bf; border-left: 4px solid #e0a800; padding: 0 0.4em; }
.note { color: #666; font-size: 0.9em; }
ul.advice li { margin: 0.3em 0; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    """A value for a table cell."""
    if value is None:
        return "&ndash;"
    if isinstance(value, bool):
        return _e(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "&ndash;"
        return _e(f"{value:.4g}")
    if isinstance(value, int):
        return _e(value)
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return ", ".join(_fmt(float(v) if isinstance(v, float) else v) for v in value)
        return "<br>".join(_fmt(v) for v in value)
    if isinstance(value, Mapping):
        return _e(json.dumps(value))
    return _e(value)


def _flat(rows: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``rows`` with nested mappings (a split's diagnostics, per group) as one row each
    (``mode_split.masses``), so that no cell holds a raw dictionary."""
    for key, value in rows.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _flat(value, f"{name}.")
        elif (isinstance(value, (list, tuple)) and value
              and all(isinstance(v, Mapping) for v in value)):
            for i, item in enumerate(value, start=1):
                yield from _flat(item, f"{name}[{i}].")
        else:
            yield name, value


def _key_table(rows: Mapping[str, Any], header: tuple[str, str] = ("name", "value")) -> str:
    if not rows:
        return '<p class="note">none recorded</p>'
    body = "".join(f'<tr><td class="key">{_e(k)}</td><td class="text">{_fmt(v)}</td></tr>'
                   for k, v in _flat(rows))
    return (f'<table><tr><th class="key">{_e(header[0])}</th><th class="key">{_e(header[1])}'
            f"</th></tr>{body}</table>")


def _method_label(name: str) -> str:
    """``continuous_tempering`` -> ``continuous-tempering`` (the methods' labels)."""
    return name.replace("_", "-")


def _same(text: str) -> str:
    return text


def _verdict_html(estimates: Mapping[str, Any], words: Callable[[str], str] = _same) -> str:
    verdict = estimates.get("verdict")
    if not isinstance(verdict, Mapping):
        return ('<section class="verdict unknown" id="verdict"><div class="status">Verdict: '
                'not recorded</div><p>This run folder\'s estimates.json has no verdict (a '
                "run of an older pemc-stan).</p></section>")
    status = str(verdict.get("status", "unknown"))
    reasons = [r for r in verdict.get("reasons") or [] if isinstance(r, Mapping)]
    checks = [str(c) for c in verdict.get("checks") or []]
    cls = status if status in ("ok", "suspect") else "unknown"
    failed = {str(r.get("name")) for r in reasons}
    if cls == "ok":
        headline = f"all {len(checks)} checks passed: no problem found"
    elif cls == "suspect":
        headline = (f"{len(reasons)} of {len(checks)} checks failed: do not trust the "
                    "estimates before acting on the remedies")
    else:
        headline = ""
    parts = [f'<section class="verdict {cls}" id="verdict">',
             f'<div class="status">Verdict: {_e(status.upper())}</div>',
             f"<p>{_e(headline)}</p>"]
    for r in reasons:
        parts.append(f'<div class="reason"><span class="name">{_e(r.get("name"))}</span>: '
                     f'{_e(words(str(r.get("message"))))}<span class="remedy"><b>What to '
                     f'do:</b> {_e(words(str(r.get("remedy"))))}</span></div>')
    if checks:
        badges = "".join(f'<span class="{"fail" if c in failed else "pass"}">'
                         f'{"&#10007;" if c in failed else "&#10003;"} {_e(c)}</span>'
                         for c in checks)
        parts.append(f'<div class="checks">checks: {badges}</div>')
    parts.append("</section>")
    return "\n".join(parts)


def _advice_html(estimates: Mapping[str, Any], words: Callable[[str], str] = _same) -> str:
    diagnostics = estimates.get("diagnostics") or {}
    messages = [words(str(m)) for m in diagnostics.get("messages") or []]
    follow_lines = [words(str(s)) for s in diagnostics.get("follow_up") or []]
    follow = estimates.get("follow_up")
    parts = ["<h2>Advice</h2>"]
    if messages:
        parts.append('<ul class="advice">' + "".join(f"<li>{_e(m)}</li>" for m in messages)
                     + "</ul>")
    else:
        parts.append('<p class="note">The diagnostics gave no advice.</p>')
    if follow_lines or (isinstance(follow, Mapping) and follow.get("steps")):
        parts.append("<h3>Follow-up runs</h3>")
        if follow_lines:
            parts.append("<ul>" + "".join(f"<li>{_e(s)}</li>" for s in follow_lines) + "</ul>")
        if isinstance(follow, Mapping):
            refused = follow.get("refused_split_gradients") or 0
            of = f", {_fmt(refused)} of them a refused mode split's" if refused else ""
            parts.append(f'<p class="note">gradient budget {_fmt(follow.get("budget"))} times '
                         f'the first attempt ({_fmt(follow.get("first_gradients"))} gradients'
                         f'{of}); spent {_fmt(follow.get("spent_gradients"))}.</p>')
    cost = estimates.get("cost")
    if isinstance(cost, Mapping) and cost.get("stage_seconds"):
        parts.append(f'<p class="note">cost: {_e(cost_line(cost["stage_seconds"]))}; '
                     f'{_fmt(cost.get("gradients"))} gradients in all.</p>')
    return "\n".join(parts)


def _summary_html(record: RunRecord) -> str:
    parts = ["<h2>Summary of the original parameters</h2>",
             '<p class="note">mean, mcse: the weighted estimates and their Monte-Carlo '
             "standard errors, ess_mean the effective sample size behind them, khat the "
             "Pareto k of their terms' tail (too heavy: the verdict's tails note names the "
             "error bars that are not reliable); sd and the 90% "
             "interval (hdi_5%, hdi_95%): the resampled draws; ess_bulk, ess_tail, r_hat: how "
             f"well the chains mixed (cells failing the verdict's R-hat &le; {RHAT_MAX} or "
             f"ESS &ge; {ESS_MIN:.0f} are marked).</p>"]
    try:
        table = summary_frame(record)
    except Exception as exc:
        logger.warning("the report's summary table was not computed: %s", exc)
        return "\n".join(parts + [f'<p class="note">not available: {_e(exc)}</p>'])
    total = len(table)
    table = table.iloc[:MAX_TABLE_ROWS]
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    rows = []
    for name, row in table.iterrows():
        cells = []
        for col, value in row.items():
            v = float(value) if isinstance(value, (int, float, np.floating)) else math.nan
            bad = ((col == "r_hat" and v > RHAT_MAX)
                   or (col in ("ess_bulk", "ess_mean") and v < ESS_MIN))
            cells.append(('<td class="bad">' if bad else "<td>") + f"{_fmt(v)}</td>")
        rows.append(f'<tr><td class="key">{_e(name)}</td>{"".join(cells)}</tr>')
    parts.append(f'<table id="summary"><tr><th class="key">parameter</th>{head}</tr>'
                 + "".join(rows) + "</table>")
    if total > MAX_TABLE_ROWS:
        parts.append(f'<p class="note">the first {MAX_TABLE_ROWS} of {total} rows; all of '
                     f"them: arviz.summary(arviz.from_netcdf('{_e(record.netcdf)}'))</p>")
    return "\n".join(parts)


def _log_z_html(estimates: Mapping[str, Any]) -> str:
    parts = ['<h2 id="log-z">Evidence log Z</h2>']
    final = estimates.get("log_z")
    rows = log_z_estimates(estimates)
    if isinstance(final, Mapping) and final.get("undefined"):
        parts.append(f'<p class="note">log Z is undefined for this model: '
                     f'{_e(final["undefined"])}</p>')
        return "\n".join(parts)
    if not isinstance(final, Mapping) or not rows:
        parts.append('<p class="note">This run has no estimate of log Z (the method estimates '
                     "it only in some settings; 'pemc-stan evidence' estimates it on its "
                     "own).</p>")
        return "\n".join(parts)
    value, se = rows[0][1], rows[0][2]
    lo, hi = value - 1.96 * se, value + 1.96 * se
    parts.append(f'<p class="logz">log Z = <b>{_e(f"{value:.4f}")}</b> &plusmn; '
                 f'{_e(f"{se:.4f}")} <span class="note">(standard error; 95% interval '
                 f'[{_e(f"{lo:.4f}")}, {_e(f"{hi:.4f}")}]; estimator '
                 f'{_e(final.get("method", "?"))})</span></p>')
    values = [v for _, v, s in rows] + [v + 2 * s for _, v, s in rows if math.isfinite(s)] \
        + [v - 2 * s for _, v, s in rows if math.isfinite(s)]
    span_lo, span_hi = min(values), max(values)
    width = span_hi - span_lo or 1.0
    span_lo, span_hi = span_lo - 0.1 * width, span_hi + 0.1 * width

    def pos(x: float) -> float:
        return 100.0 * (x - span_lo) / (span_hi - span_lo)

    if math.isfinite(se):
        parts.append(f'<div class="bar" title="95% interval"><div class="ci" style="left: '
                     f'{pos(lo):.2f}%; width: {max(pos(hi) - pos(lo), 0.5):.2f}%"></div>'
                     f'<div class="pt" style="left: {pos(value):.2f}%"></div></div>'
                     f'<div class="barscale"><span>{_e(f"{span_lo:.4g}")}</span><span>95% '
                     f'interval (bar) and estimate (mark)</span><span>{_e(f"{span_hi:.4g}")}'
                     "</span></div>")
    body = "".join(f'<tr><td class="key">{_e(label)}</td><td>{_e(f"{v:.4f}")}</td>'
                   f"<td>{_fmt(s)}</td><td>{_fmt(v - 1.96 * s)}</td><td>{_fmt(v + 1.96 * s)}"
                   "</td></tr>" for label, v, s in rows)
    parts.append('<table id="log-z-estimates"><tr><th class="key">estimate</th><th>log Z</th>'
                 f"<th>standard error</th><th>95% low</th><th>95% high</th></tr>{body}</table>")
    return "\n".join(parts)


def _diagnostics_html(estimates: Mapping[str, Any]) -> str:
    diagnostics = estimates.get("diagnostics") or {}
    shown = {k: v for k, v in diagnostics.items() if k not in ("messages", "follow_up")}
    return "<h2>Diagnostics</h2>\n" + _key_table(shown)


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"data:image/png;base64,{data}"


def _figures_html(figures: Sequence[WrittenFigure], plots: bool, total: int) -> str:
    parts = ["<h2>Pictures</h2>"]
    if not plots:
        parts.append('<p class="note">Pictures were not asked for; '
                     "'pemc-stan report RUN_DIR' (or write_report) draws them.</p>")
        return "\n".join(parts)
    if not figures:
        parts.append('<p class="note">No picture could be drawn (see the warnings of the '
                     "run).</p>")
    if total > MAX_PANELS:
        parts.append(f'<p class="note">The trace shows {MAX_PANELS} of the {total} scalar '
                     "elements of the parameters (the first elements of each).</p>")
    for f in figures:
        try:
            src = _image(f.path)
        except OSError as exc:
            logger.warning("the picture %s was not embedded: %s", f.name, exc)
            continue
        parts.append(f'<figure id="fig-{_e(f.path.stem)}"><h3>{_e(f.title)}</h3>'
                     f'<img src="{src}" alt="{_e(f.title)}">'
                     f"<figcaption>{_e(f.caption)} <span class=\"note\">(file: "
                     f"{_e(f.name)})</span></figcaption></figure>")
    return "\n".join(parts)


def _modes_html(record: RunRecord) -> str:
    attrs = record.idata.posterior.attrs
    raw = attrs.get("pemc_search")
    search = None
    if raw:
        with contextlib.suppress(ValueError):
            search = json.loads(str(raw))
    modes = record.modes
    if not search and not modes:
        return ""
    parts = ["<h2>The pilot's search for modes</h2>"]
    if isinstance(search, Mapping):
        parts.append(_key_table(search))
    if modes and modes.get("columns"):
        columns = list(modes["columns"])[:MAX_PANELS]
        shares = list(modes.get("shares") or [])
        head = "".join(f"<th>{_e(c)}</th>" for c in columns)
        body = []
        for k, centre in enumerate(modes.get("centres") or []):
            share = _fmt(100 * float(shares[k])) + "%" if k < len(shares) else "&ndash;"
            cells = "".join(f"<td>{_fmt(float(v))}</td>" for v in list(centre)[:len(columns)])
            body.append(f'<tr><td class="key">mode {k + 1}</td><td>{share}</td>{cells}</tr>')
        parts.append('<h3>Modes found (centres, in the parameters\' own space)</h3>'
                     f'<table id="modes"><tr><th class="key">mode</th><th>share of mass found'
                     f"</th>{head}</tr>{''.join(body)}</table>")
        if len(modes["columns"]) > len(columns):
            parts.append(f'<p class="note">the first {len(columns)} of '
                         f'{len(modes["columns"])} columns; all of them: {MODES_NAME}</p>')
    return "\n".join(parts)


def _settings_html(estimates: Mapping[str, Any], attrs: Mapping[str, Any]) -> str:
    known = {"method", "title", "model", "data", "options", "sampler", "requested",
             "earlier_runs",
             "expectations", "log_z",
             "diagnostics", "verdict", "follow_up"}
    others = {k: v for k, v in estimates.items() if k not in known}
    parts = ["<h2>Settings</h2>", "<h3>Method options</h3>",
             _key_table(estimates.get("options") or {}),
             "<h3>Sampler: the judged run</h3>", _key_table(estimates.get("sampler") or {}),
             "<h3>Sampler: as requested</h3>", _key_table(estimates.get("requested") or {})]
    if others:
        parts += ["<h3>Values the run settled on</h3>", _key_table(others)]
    version = attrs.get("inference_library_version")
    if version:
        parts.append(f'<p class="note">pemc-stan {_e(version)}</p>')
    return "\n".join(parts)


def _program_html(title: str, source: tuple[str, str] | None, flags: Sequence[bool] | None,
                  anchor: str) -> str:
    if source is None:
        return (f"<h3>{_e(title)}</h3><p class=\"note\">not in this run folder (a run of an "
                "older pemc-stan)</p>")
    name, text = source
    lines = []
    for i, line in enumerate(text.splitlines()):
        user = flags is not None and i < len(flags) and flags[i]
        lines.append(f'<span class="line{" user" if user else ""}"><span class="no">{i + 1}'
                     f"</span>{_e(line)}</span>")
    return (f"<h3>{_e(title)} <span class=\"note\">({_e(name)})</span></h3>"
            f'<pre class="code" id="{anchor}">' + "".join(lines) + "</pre>")


def _programs_html(record: RunRecord) -> str:
    flags = None
    if record.generated_program is not None and record.user_program is not None:
        flags = user_lines(record.generated_program[1], record.user_program[1])
    parts = ["<h2>Stan programs</h2>"]
    if flags is not None:
        parts.append(f'<p class="legend"><span class="user">highlighted</span> lines of the '
                     f"generated program are your own ({sum(flags)} lines taken over "
                     "verbatim from your program).</p>")
    parts.append(_program_html("The generated program", record.generated_program, flags,
                               "generated-program"))
    parts.append("<details><summary>Your program</summary>"
                 + _program_html("Your program", record.user_program, None, "user-program")
                 + "</details>")
    return "\n".join(parts)


def build_html(record: RunRecord, figures: Sequence[WrittenFigure], *,
               plots: bool = True, words: Callable[[str], str] = _same) -> str:
    """The report page of a run (self-contained: inline CSS, images as data URIs).

    Parameters
    ----------
    record
        The run folder's content (:func:`read_run`).
    figures
        The pictures to embed, in order.
    plots
        False when the pictures were not asked for (the page says so).
    words
        How advice is written for the page's reader (the command line gives its flags
        for Python's keywords); as recorded by default.

    Returns
    -------
    str
        The HTML document.

    Raises
    ------
    Nothing (a section that cannot be built says so in the page and is logged).
    """
    estimates = record.estimates
    method = str(estimates.get("method", "?"))
    label = _method_label(method)
    sampler = estimates.get("sampler") or {}
    model = str(estimates.get("model") or record.model_stem)
    data = estimates.get("data")
    runs = ""
    if sampler:
        runs = (f"the judged run: {_e(sampler.get('chains', '?'))} chains &times; "
                f"{_e(sampler.get('iter_sampling', '?'))} draws after "
                f"{_e(sampler.get('iter_warmup', '?'))} warm-up"
                + (f", thinned by {_e(sampler['thin'])}" if sampler.get("thin", 1) != 1 else "")
                + f", seed {_e(sampler.get('seed'))}"
                + (f", in {_e(sampler['csv_folder'])}" if sampler.get("csv_folder") else ""))
        earlier = estimates.get("earlier_runs") or []
        if earlier:
            runs += "<br>earlier runs: " + ", ".join(_e(e) for e in earlier)
    subtitle = (f"model {_e(model)}" + (f"; data {_e(data)}" if data else "; no data")
                + (f"<br>{runs}" if runs else ""))
    total = len(record.parameter_columns())
    sections = [
        _verdict_html(estimates, words),
        _advice_html(estimates, words),
        _summary_html(record),
        _log_z_html(estimates),
        _diagnostics_html(estimates),
        _figures_html(figures, plots, total),
        _modes_html(record),
        _settings_html(estimates, record.idata.posterior.attrs),
        _programs_html(record),
    ]
    files = ", ".join(sorted(p.name + ("/" if p.is_dir() else "")
                             for p in record.folder.iterdir()
                             if not p.name.startswith(".") and p.name != "partial-run"))
    title = f"pemc-stan report: {record.model_stem} ({estimates.get('title') or label})"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
            f"<h1>{_e(title)}</h1>\n<p class=\"subtitle\">{subtitle}</p>\n"
            + "\n".join(s for s in sections if s)
            + f'\n<h2>Files</h2>\n<p class="note">in this run folder: {_e(files)}</p>\n'
            "</main>\n</body>\n</html>\n")


# ---------------------------------------------------------------------- writing
def write_report(folder: str | Path, *, plots: bool = True,
                 words: Callable[[str], str] = _same) -> list[str]:
    """Draw the pictures and write ``report.html`` into a run folder, from its files only.

    Parameters
    ----------
    folder
        A run folder (``pemc-stan sample``'s ``--output-dir``, or the folder being
        written by it).
    plots
        Draw the pictures into ``plots/`` (a picture that fails is logged as a
        warning naming it and left out).
    words
        As :func:`build_html`.

    Returns
    -------
    list of str
        The files written, relative to ``folder``.

    Raises
    ------
    RunFolderError
        If the folder is not a run folder or its files cannot be read.
    OutputPathError
        If the report cannot be written.
    """
    record = read_run(folder)
    figures: list[WrittenFigure] = []
    if plots:
        try:
            figures = write_figures(record.folder, record.idata,
                                    columns=record.parameter_columns(),
                                    estimates=record.estimates, modes=record.modes)
        except ImportError as exc:
            logger.warning("no pictures: %s", exc)
        except OSError as exc:
            raise OutputPathError(f"cannot write the pictures into {record.folder / PLOTS_DIR}"
                                  f": {exc.strerror or exc}", "pass a run folder you can "
                                  "write to", record.folder / PLOTS_DIR) from exc
    page = build_html(record, figures, plots=plots, words=words)
    write_text_atomically(record.folder / REPORT_NAME, page)
    return [f.name for f in figures] + [REPORT_NAME]


def png_payloads(page: str) -> list[bytes]:
    """The PNG files embedded in a report page (its data URIs), decoded.

    Raises
    ------
    binascii.Error
        If a data URI is not valid base64.
    """
    return [base64.b64decode(m.group(1))
            for m in re.finditer(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]
