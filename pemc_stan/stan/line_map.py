"""Where each line of a generated program came from, and CmdStan's messages told in the
user's lines.

A transformation prints the user's statements (:mod:`pemc_stan.stan.printer`) into
a Jinja template.  The printer records, for each line it prints, the source line of
the statement it printed (a :class:`SourcedText`); the template renderer
(:func:`pemc_stan.core.templates.render_mapped`) finds where each printed block
landed in the rendered program and keeps a :class:`LineMap`: generated line ->
user's line, 0 for a line the user never wrote.

CmdStan names the generated program in its messages, e.g.
``Scale parameter is 0, but must be positive! (in 'm_ct.stan', line 96, column 4 to
column 30)``; :meth:`LineMap.rewrite` turns such a location into ``(in your m.stan,
line 7; generated program line 96)``, or, for generated code, into ``(in the
generated program m_ct.stan, line 96, column 4 to column 30)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["LineMap", "SourcedText", "locate_blocks"]

#: A location in a CmdStan message: ``(in 'file.stan', line 96, column 4 to column 30)``
#: (also ``... to line 98, column 5``).
_LOCATION_RE = re.compile(
    r"(?P<space>[ \t]*)\(in '(?P<file>[^']+)', line (?P<line>\d+)(?P<rest>[^()]*)\)")


class SourcedText(str):
    """Stan text that knows, for each of its lines, the source line it was printed from.

    A ``str`` (templates and callers use it as text); ``sources[i]`` is the user's
    line of line ``i`` (0-based) of the text, 0 for a line printed from a node built
    by hand.  String operations return plain ``str``.
    """

    sources: tuple[int, ...]

    def __new__(cls, text: str, sources: Sequence[int]) -> SourcedText:
        """Text and its per-line sources.

        Raises
        ------
        ValueError
            If ``sources`` does not have one entry per line of ``text``.
        """
        count = len(text.split("\n")) if text else 0
        if len(sources) != count:
            raise ValueError(f"{len(sources)} source lines for a text of {count} lines")
        obj = super().__new__(cls, text)
        obj.sources = tuple(int(s) for s in sources)
        return obj

    def __reduce__(self) -> tuple[type[SourcedText], tuple[str, tuple[int, ...]]]:
        return (SourcedText, (str(self), self.sources))

    @classmethod
    def from_lines(cls, lines: Iterable[tuple[str, int]]) -> SourcedText:
        """Join ``(line, source)`` pairs.

        Raises
        ------
        Nothing.
        """
        pairs = list(lines)
        return cls("\n".join(text for text, _ in pairs), [src for _, src in pairs])

    @classmethod
    def join(cls, parts: Iterable[str]) -> SourcedText:
        """Parts joined by newlines; a plain ``str`` part's lines have no source.

        Raises
        ------
        Nothing.
        """
        pairs: list[tuple[str, int]] = []
        for part in parts:
            lines = part.split("\n")
            sources = part.sources if isinstance(part, SourcedText) and part else (0,) * len(lines)
            pairs.extend(zip(lines, sources, strict=True))
        return cls.from_lines(pairs)


def locate_blocks(text: str, blocks: Iterable[SourcedText]) -> tuple[int, ...]:
    """The source of every line of ``text`` in which printed ``blocks`` were embedded.

    A block is found wherever its lines appear, one after another, as whole lines of
    ``text`` (compared without leading and trailing blanks, so a template may indent
    it); longer blocks claim their lines first, and a block found twice maps both
    places.  Lines of no block are 0 (generated).

    Parameters
    ----------
    text
        The rendered program.
    blocks
        The printed pieces the template embedded.

    Returns
    -------
    tuple of int
        One entry per line of ``text`` (``text.split("\\n")``).

    Raises
    ------
    Nothing.
    """
    lines = [ln.strip() for ln in text.split("\n")]
    starts: dict[str, list[int]] = {}
    for i, ln in enumerate(lines):
        starts.setdefault(ln, []).append(i)
    sources = [0] * len(lines)
    for block in sorted(blocks, key=lambda b: -len(b.sources)):
        if not block or not any(block.sources):
            continue
        wanted = [ln.strip() for ln in block.split("\n")]
        n = len(wanted)
        for i in starts.get(wanted[0], ()):
            if lines[i:i + n] != wanted:
                continue
            for j, src in enumerate(block.sources):
                if src and not sources[i + j]:
                    sources[i + j] = src
    return tuple(sources)


@dataclass(frozen=True)
class LineMap:
    """Generated program line -> the user's source line.

    Attributes
    ----------
    sources
        ``sources[g - 1]`` is the user's line of generated line ``g`` (1-based), 0 when
        the user never wrote it.
    user_file
        The user's file name for messages (``"model.stan"``); empty when the program was
        given as text.
    """

    sources: tuple[int, ...]
    user_file: str = ""

    def user_line(self, generated: int) -> int | None:
        """The user's line of generated line ``generated`` (1-based), None for generated code.

        Raises
        ------
        Nothing.
        """
        if 1 <= generated <= len(self.sources) and self.sources[generated - 1]:
            return self.sources[generated - 1]
        return None

    @property
    def user_label(self) -> str:
        """``"your model.stan"``, or ``"your program"`` for a program given as text."""
        return f"your {self.user_file}" if self.user_file else "your program"

    def rewrite(self, text: str, generated_file: str) -> str:
        """``text`` with every location in ``generated_file`` told in the user's lines.

        ``(in 'm_ct.stan', line 96, column 4 to column 30)`` becomes ``(in your m.stan,
        line 7; generated program line 96)`` when line 96 was printed from the user's
        line 7, else ``(in the generated program m_ct.stan, line 96, column 4 to column
        30)``.  Stan adds the location of every enclosing call to a message (the
        generated model block's call of the function that holds the user's statement):
        after a location in the user's lines, the generated ones that follow on the
        same line are left out.  Locations in other files are left as they are.

        Parameters
        ----------
        text
            A CmdStan message (any number of lines).
        generated_file
            The generated program's file name as CmdStan gives it (``"m_ct.stan"``).

        Raises
        ------
        Nothing.
        """
        found_user = False

        def located(match: re.Match[str]) -> str:
            nonlocal found_user
            if match["file"] != generated_file:
                return match[0]
            line = int(match["line"])
            user = self.user_line(line)
            if user is None:
                if found_user:  # an enclosing call of what the user wrote
                    return ""
                return (f"{match['space']}(in the generated program {generated_file}, "
                        f"line {line}{match['rest']})")
            found_user = True
            return (f"{match['space']}(in {self.user_label}, line {user}; generated program "
                    f"line {line})")

        out = []
        for piece in text.split("\n"):
            found_user = False
            out.append(_LOCATION_RE.sub(located, piece))
        return "\n".join(out)
