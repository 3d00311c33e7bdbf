"""Each rank's output, tailed from its files: the rank writes ``rank{R}.out``/``.err`` in the run's
folder, the kernel reads what was appended. The tail stays in memory; the whole stays on disk.

Lines are shown as a terminal shows them: a carriage return goes back to the start of the line
and what follows overwrites it, so a progress bar (tqdm writes ``\r`` and the bar again) is one
line that changes, and its latest state is shown while it is still being drawn.
"""

from __future__ import annotations

import os

from labkit.i18n import t

LOG_TAIL_LINES = 400  # lines of each stream kept in memory and shown; the file keeps all
LOG_LINE_CHARS = 2000  # a longer line is cut when shown (the file keeps it whole)


class RankLog:
    """One rank's stdout and stderr: the tail in memory, the whole on disk."""

    def __init__(self, rank: int, run_dir: str) -> None:
        self.rank = rank
        self.stdout_path = os.path.join(run_dir, f"rank{rank}.out")
        self.stderr_path = os.path.join(run_dir, f"rank{rank}.err")
        self.streams: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.dropped = {"stdout": 0, "stderr": 0}
        self._offset = {"stdout": 0, "stderr": 0}
        self._start = {"stdout": 0, "stderr": 0}
        self._partial = {"stdout": b"", "stderr": b""}
        self.live = {"stdout": "", "stderr": ""}  # the line being written (no newline yet), as shown
        self.last_line = ""

    def start_at_end(self) -> None:
        """Read only what is written from now on: a warm cell's log holds that cell's output alone."""
        for name, path in (("stdout", self.stdout_path), ("stderr", self.stderr_path)):
            try:
                self._offset[name] = self._start[name] = os.path.getsize(path)
            except FileNotFoundError:
                pass

    def poll(self, max_bytes: int = 1 << 20) -> bool:
        """Read what was appended to the files since the last call; True if anything was."""
        grew = False
        for name, path in (("stdout", self.stdout_path), ("stderr", self.stderr_path)):
            try:
                if os.stat(path).st_size <= self._offset[name]:
                    continue  # nothing new: one stat, not an open (the kernel polls several times a cell)
                with open(path, "rb") as f:
                    f.seek(self._offset[name])
                    data = f.read(max_bytes)
            except FileNotFoundError:
                continue
            if not data:
                continue
            grew = True
            self._offset[name] += len(data)
            data = self._partial[name] + data
            lines = data.split(b"\n")
            partial = collapse_cr(lines.pop())  # a progress bar redrawn 1000 times stays one line
            if len(render_cr(partial)) > LOG_LINE_CHARS:  # a huge line with no newline yet
                lines.append(partial)
                partial = b""
            self._partial[name] = partial
            self._add(name, lines)
            self._show_live(name)
        return grew

    def _show_live(self, name: str) -> None:
        live = _clean(render_cr(self._partial[name]).decode("utf-8", errors="replace")[:LOG_LINE_CHARS])
        self.live[name] = live
        if live.strip():
            self.last_line = live

    def flush(self) -> None:
        while self.poll():
            pass
        for name in self.streams:
            if self._partial[name]:
                self._add(name, [self._partial[name]])
                self._partial[name] = b""
                self.live[name] = ""

    def _add(self, name: str, lines: list[bytes]) -> None:
        # bytes -> text as a terminal shows it: \r overwrites, invalid UTF-8 becomes U+FFFD,
        # other control characters are dropped
        text = [_clean(render_cr(b).decode("utf-8", errors="replace")[:LOG_LINE_CHARS]) for b in lines]
        if text:
            self.last_line = next((s for s in reversed(text) if s.strip()), self.last_line)
        buf = self.streams[name]
        buf.extend(text)
        if len(buf) > LOG_TAIL_LINES:
            extra = len(buf) - LOG_TAIL_LINES
            del buf[:extra]
            self.dropped[name] += extra

    def text(self, name: str) -> str:
        lines = self.streams[name]
        head = []
        if self.dropped[name]:
            path = self.stdout_path if name == "stdout" else self.stderr_path
            head = [t("launch.log.truncated", n=self.dropped[name], path=path)]
        live = [self.live[name]] if self.live[name] else []
        return "\n".join(head + lines + live)

    @property
    def stdout(self) -> str:
        return self.text("stdout")

    @property
    def stderr(self) -> str:
        return self.text("stderr")

    def read_all(self, name: str = "stdout") -> str:
        """The whole stream from disk (may be large)."""
        path = self.stdout_path if name == "stdout" else self.stderr_path
        with open(path, "rb") as f:
            f.seek(self._start[name])
            return f.read().decode("utf-8", errors="replace")

    def __str__(self) -> str:
        return self.stdout + ("\n" + self.stderr if self.streams["stderr"] or self.dropped["stderr"] else "")

    def __repr__(self) -> str:
        return f"<RankLog rank {self.rank}: {len(self.streams['stdout'])} stdout, {len(self.streams['stderr'])} stderr lines>"


def render_cr(line: bytes) -> bytes:
    """One line as a terminal leaves it: after each ``\r`` the text overwrites the line from its start."""
    if b"\r" not in line:
        return line
    shown = b""
    for part in line.split(b"\r"):
        shown = part + shown[len(part) :]
    return shown


def collapse_cr(line: bytes) -> bytes:
    """An unfinished line, shortened to what a terminal shows plus the text after the last ``\r``
    (the cursor is there: the next bytes overwrite from that column on)."""
    head, cr, tail = line.rpartition(b"\r")
    return render_cr(head) + cr + tail if cr else line


def _clean(s: str) -> str:
    return "".join(ch for ch in s if ch >= " " or ch == "\t")


def tail_file(path: str, lines: int) -> str:
    """The last ``lines`` lines of a file (read from its last 200 kB); "" if it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 200_000))
            return "\n".join(f.read().decode("utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
