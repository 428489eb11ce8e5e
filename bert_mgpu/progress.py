"""Progress lines for long jobs: counts, rate and ETA, at most one line every few seconds."""

import time
from typing import Optional

from absl import logging


def format_duration(seconds: float) -> str:
    """12345 -> '3h25m45s'."""
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
    """Logs `what: done/total (pct) rate/s elapsed ETA` every `interval` seconds and at the end.

    Example:
      progress = Progress("lines", total=n)
      for ...: progress.update(batch_size)
      progress.done()
    """

    def __init__(self, what: str, total: Optional[int] = None, interval: float = 10.0,
                 unit: str = "", clock=time.monotonic):
        self.what, self.total, self.interval, self.unit = what, total, interval, unit
        self._clock = clock
        self.start = self._last = clock()
        self.count = 0

    def line(self) -> str:
        elapsed = max(self._clock() - self.start, 1e-9)
        rate = self.count / elapsed
        text = f"{self.what}: {self.count:,}"
        if self.total:
            text += f"/{self.total:,} ({100.0 * self.count / self.total:.1f}%)"
        text += f", {rate:,.1f} {self.unit or self.what}/s, elapsed {format_duration(elapsed)}"
        if self.total and rate > 0 and self.count < self.total:
            text += f", ETA {format_duration((self.total - self.count) / rate)}"
        return text

    def update(self, n: int = 1) -> None:
        self.count += n
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            logging.info("%s", self.line())

    def done(self) -> None:
        logging.info("%s (done)", self.line())
