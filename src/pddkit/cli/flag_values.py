"""The values of command-line flags that are not one plain number or word: --batch-size
(a number or auto), comma-separated lists of numbers or names; each error names its flag."""

from __future__ import annotations

import click

from pddkit.errors import PddkitError


def batch_size(text: str) -> int | str:
    """--batch-size: a whole number, or "auto" (checked with the other options)."""
    text = str(text).strip().lower()
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither a whole number nor auto") from None


def floats(text: str, option: str) -> tuple[float, ...]:
    """'1e-4,1e-3' -> (1e-4, 1e-3); `option` names the flag in the error."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise PddkitError(f"{option} {text!r} must be numbers separated by commas") from None
    if not values:
        raise PddkitError(f"{option} needs at least one value")
    return values


def whole_numbers(text: str, option: str) -> tuple[int, ...]:
    """'25,50,100' -> (25, 50, 100), each at least 1; `option` names the flag in errors."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise PddkitError(f"{option} {text!r} must be whole numbers separated by commas") from None
    if not values or min(values) < 1:
        raise PddkitError(f"{option} {text!r} must be whole numbers of at least 1")
    return values


def names(text: str | None, option: str) -> tuple[str, ...]:
    """'mean,share' -> ('mean', 'share'); None -> (); `option` names the flag in the error."""
    if text is None:
        return ()
    values = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    if not values:
        raise PddkitError(f"{option} needs at least one value")
    return values


def window_lengths(text: str) -> tuple[int, ...]:
    """--windows '32,64,128' -> (32, 64, 128)."""
    try:
        wins = tuple(sorted({int(w) for w in text.split(",") if w.strip()}))
    except ValueError:
        raise PddkitError(f"--windows {text!r} must be whole numbers of words") from None
    if not wins or min(wins) < 1:
        raise PddkitError(f"--windows {text!r} must be positive numbers of words")
    return wins
