"""Progress on stderr for long runs: tqdm's bar on a terminal (or in a notebook), and where stderr
is a file or a pipe (a CI log, ``2> index.log``), a line every ``every`` seconds with done/total,
the rate and the ETA: tqdm's carriage-return redraws would pile up there as one unreadable line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LineProgress", "progress_bar"]

#: Seconds between two progress lines where stderr is not a terminal.
LINE_EVERY = 10.0


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class LineProgress:
    """A progress line on stderr (``stream``, read when a line is written, so a redirected stderr
    gets it) every ``every`` seconds, and one when closed. Its ETA is the mean rate so far (the
    first step loads the model; a recent-rate estimate swung widely)."""

    def __init__(self, total: int, *, desc: str, unit: str, every: float = LINE_EVERY, clock: Callable[[], float] = time.monotonic, stream: Any = None) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.n = 0
        self._clock, self._stream = clock, stream
        self._start = clock()
        self._last = self._start
        self._closed = False

    def update(self, n: int = 1) -> None:
        """``n`` more done; writes a line if it is time for one."""
        self.n += n
        now = self._clock()
        if self.n < self.total and now - self._last >= self.every:
            self._last = now
            self._write(self._line(now))

    def _line(self, now: float) -> str:
        spent = now - self._start
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        rate = self.n / spent if spent > 0 else 0.0
        eta = _clock((self.total - self.n) / rate) if rate > 0 else "?"
        return f"{self.desc}: {self.n}/{self.total} {self.unit}s{share}, {_clock(spent)} elapsed, {rate:.1f} {self.unit}s/s, ETA {eta}"

    def _write(self, line: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write(line + "\n")
        stream.flush()

    def close(self) -> None:
        """The last line: how many, in how long, at what rate (once)."""
        if self._closed:
            return
        self._closed = True
        if self.total or self.n:
            spent = self._clock() - self._start
            rate = f", {self.n / spent:.1f} {self.unit}s/s" if spent > 0 else ""
            self._write(f"{self.desc}: {self.n}/{self.total} {self.unit}s, done in {_clock(spent)}{rate}")

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: int, *, desc: str, unit: str, show: bool) -> Any:
    """Something with ``update(n)`` and ``close()`` (and a context manager): nothing shown unless
    ``show``; then tqdm's bar where stderr is a terminal or a notebook shows it, else
    :class:`LineProgress`."""
    from tqdm.auto import tqdm

    if show and not sys.stderr.isatty() and "ipykernel" not in sys.modules:
        return LineProgress(total, desc=desc, unit=unit)
    return tqdm(total=total, desc=desc, unit=unit, disable=not show)
