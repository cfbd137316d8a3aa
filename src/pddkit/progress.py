"""Progress bars that CI can silence: PDDKIT_PROGRESS=0 (or a non-terminal stderr) hides them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def enabled() -> bool:
    setting = os.environ.get("PDDKIT_PROGRESS", "auto").lower()
    if setting in ("0", "false", "off", "no"):
        return False
    if setting in ("1", "true", "on", "yes"):
        return True
    return sys.stderr.isatty()


def bar(total: int | None, desc: str, unit: str = "it"):
    """A tqdm bar to `update()` by hand; a no-op object when progress is off."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled(), leave=False)


def track(items: Iterable[T], total: int | None, desc: str, unit: str = "it") -> Iterable[T]:
    from tqdm.auto import tqdm

    return tqdm(items, total=total, desc=desc, unit=unit, disable=not enabled(), leave=False)
