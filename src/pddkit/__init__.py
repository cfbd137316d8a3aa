"""pddkit: was this text in this language model's pre-training data?

Importing the package has no side effects and does not import torch; the heavy
modules load when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pddkit.version import __version__

__all__ = ["PddkitError", "__version__", "evaluate", "score", "summary"]

if TYPE_CHECKING:  # pragma: no cover
    from pddkit.api import evaluate, score
    from pddkit.errors import PddkitError
    from pddkit.reporting.terminal import summary


def __getattr__(name: str) -> Any:
    if name in ("score", "evaluate"):
        from pddkit import api

        return getattr(api, name)
    if name == "summary":  # the table `pddkit run` prints, of a RunResult
        from pddkit.reporting.terminal import summary

        return summary
    if name == "PddkitError":
        from pddkit.errors import PddkitError

        return PddkitError
    raise AttributeError(f"module 'pddkit' has no attribute {name!r}")
