"""Each rank's output, tailed from its files: the rank writes ``rank{R}.out``/``.err`` in the run's
folder, the kernel reads what was appended. The tail stays in memory; the whole stays on disk.
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
            self._partial[name] = lines.pop()
            if len(self._partial[name]) > LOG_LINE_CHARS:  # a huge line with no newline yet
                lines.append(self._partial[name])
                self._partial[name] = b""
            self._add(name, lines)
        return grew

    def flush(self) -> None:
        while self.poll():
            pass
        for name in self.streams:
            if self._partial[name]:
                self._add(name, [self._partial[name]])
                self._partial[name] = b""

    def _add(self, name: str, lines: list[bytes]) -> None:
        # bytes -> text: invalid UTF-8 becomes U+FFFD; control characters are dropped
        text = [_clean(b.decode("utf-8", errors="replace")[:LOG_LINE_CHARS]) for b in lines]
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
        return "\n".join(head + lines)

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
