"""Progress bars that CI can silence: PDDKIT_PROGRESS=0 (or a non-terminal stderr) hides them."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


def enabled() -> bool:
    setting = os.environ.get("PDDKIT_PROGRESS", "auto").lower()
    if setting in ("0", "false", "off", "no"):
        return False
    if setting in ("1", "true", "on", "yes"):
        return True
    return sys.stderr.isatty()


LOG_EVERY_S = 60.0  # with bars off, a long job still logs where it is at most this often


def bar(total: int | None, desc: str, unit: str = "it"):
    """A tqdm bar to `update()` by hand. With bars off (CI, a batch job, nohup), a job
    that runs for minutes logs one line a minute at most: done of total and the ETA."""
    from tqdm.auto import tqdm

    if enabled():
        return tqdm(total=total, desc=desc, unit=unit, leave=False)
    return _LoggedBar(total, desc, unit)


class _LoggedBar:
    """The part of tqdm's interface pddkit uses (update, close, a context manager), logging
    progress every LOG_EVERY_S seconds instead of drawing."""

    def __init__(self, total: int | None, desc: str, unit: str) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.start = self.said = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.said < LOG_EVERY_S:
            return
        self.said = now
        elapsed = now - self.start
        line = f"{self.desc}: {self.n:,}"
        if self.total:
            line += f"/{self.total:,} {self.unit} ({self.n / self.total:.0%})"
            if self.n:
                line += f", about {_minutes(elapsed * (self.total - self.n) / self.n)} left"
        else:
            line += f" {self.unit}"
        logger.info("%s, %s so far", line, _minutes(elapsed))

    def close(self) -> None:
        pass

    def __enter__(self) -> _LoggedBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def track(items: Iterable[T], total: int | None, desc: str, unit: str = "it") -> Iterable[T]:
    from tqdm.auto import tqdm

    return tqdm(items, total=total, desc=desc, unit=unit, disable=not enabled(), leave=False)
