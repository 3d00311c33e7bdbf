"""Code comments in the edition's language; the code itself is one for both editions.

A code cell of a lesson's source is written once, with English comments. Its Romanian comments
stand in the cell's metadata, ``comments_ro``: each English comment's text (what follows ``#``)
mapped to its translation. In the MyST file that is a YAML block at the top of the cell::

    ```{code-cell} ipython3
    ---
    comments_ro:
      the root: the docs advise False: rădăcina: documentația recomandă False
    ---
    fully_shard(model, mesh=mesh, reshard_after_forward=False)  # the root: the docs advise False
    ```

The build writes the Romanian edition with each comment replaced, where it stood; the code around
it does not change (``code(...)`` of both editions is the same, which the course's tests check).
A comment with no translation, or a translation no comment uses, stops the build: the Romanian
edition never shows an English comment, and no stale entry stays behind. Solution markers
(``### BEGIN SOLUTION``) and tool pragmas (``# noqa``) are not prose and are never translated.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from labkit.i18n import t
from labkit.wire.errors import LabkitError

META_KEY = "comments_{lang}"  # a code cell's metadata key holding the comments of edition ``lang``
NOT_PROSE = re.compile(r"^#+\s*(BEGIN |END )?(SOLUTION|HIDDEN TESTS)\b|^#\s*(noqa|type:|fmt:|pragma)\b")


class CommentError(LabkitError):
    """A code cell whose comments and their translations do not match."""


def python_only(text: str) -> str:
    """The cell with its magic and shell lines blanked (``%load_ext labkit``, ``!nvidia-smi``)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.split("\n"))


@dataclass(frozen=True)
class Comment:
    row: int  # the cell's line, from 0
    col: int  # where the ``#`` is
    hashes: str  # "#" or "###": kept as written
    text: str  # what follows the hashes and one space

    @property
    def end(self) -> int:
        return self.col + len(self.hashes) + (1 if self.text else 0) + len(self.text)


def comments(source: str) -> list[Comment]:
    """The prose comments of a cell, in order (magic and shell lines are not Python and have none)."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(python_only(source)).readline):
        if tok.type != tokenize.COMMENT or NOT_PROSE.match(tok.string):
            continue
        hashes = re.match(r"#+", tok.string).group(0)  # type: ignore[union-attr]
        rest = tok.string[len(hashes) :]
        text = rest[1:] if rest.startswith(" ") else rest
        found.append(Comment(tok.start[0] - 1, tok.start[1], hashes, text.rstrip()))
    return found


def code(source: str) -> str:
    """The cell without its prose comments (and without the spaces before them): what both editions share."""
    lines = source.split("\n")
    for c in reversed(comments(source)):
        lines[c.row] = lines[c.row][: c.col].rstrip()
    return "\n".join(lines)


def translate(source: str, table: dict[str, str], where: str) -> str:
    """``source`` with each prose comment replaced by its entry in ``table``; every comment needs one."""
    lines = source.split("\n")
    found = comments(source)
    missing = [c.text for c in found if c.text not in table]
    if missing:
        raise CommentError(t("course.src.comment_missing", where=where, comment=missing[0], n=len(missing)))
    unused = sorted(set(table) - {c.text for c in found})
    if unused:
        raise CommentError(t("course.src.comment_unused", where=where, comment=unused[0]))
    for c in reversed(found):  # right to left: an earlier replacement does not move a later one
        text = table[c.text]
        if "\n" in text or not text.strip():
            raise CommentError(t("course.src.comment_line", where=where, comment=c.text))
        line = lines[c.row]
        lines[c.row] = f"{line[: c.col]}{c.hashes} {text.strip()}{line[c.end :]}"
    return "\n".join(lines)
