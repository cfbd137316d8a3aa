"""SaMIA, Sampling-based Membership Inference Attack (Kaneko et al. 2024, "Sampling-based
Pseudo-Likelihood for Membership Inference Attacks", arXiv 2404.11262; the authors' code
nlp-titech/samia `src/sampling.py`, `src/eval_samia.py`): the model continues the first half
of a text `samples` times; a text whose continuations recall more of its true second half
(ROUGE-1 recall) is more likely a member. It reads no log-probability at all, so it runs on
a served model that gives none (`openai`, sampling only: a run of only `samia` skips the
target statistics pass).

The score: prompt = the first floor(prefix * #words) whitespace words; reference = the
remaining words; per continuation, ROUGE-1 recall = |words(continuation) ∩ words(reference)|
(multiset intersection) / #words(reference), times len(zlib.compress(" ".join(words)))
of the continuation's words with zlib=true; score = the mean over the samples.

The candidate is the continuation's words only. The authors' code decodes prompt and
continuation together and drops the first round(0.5 * WikiMIA's length bucket) words: on
WikiMIA, whose texts hold exactly their bucket's number of words, those are the prompt's,
unless the continuation's first word is glued to the prompt's last (no space between),
which it then drops too. Every difference from the authors' code, marked by whether it
changes scores: docs/methods/samia.md.

Cost per text: one prefill of the prompt and `samples` sampled continuations (up to 1024
tokens in all with the prompt; `max_new_tokens` > 0 caps the continuation), per distinct (prefix, top_k,
max_new_tokens); calls differing only in `samples` or `zlib` share the continuations.
"""

from __future__ import annotations

import math
import zlib as _zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import astuple, dataclass

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation

TOP_P = 1.0  # SPEC 3b: temperature 1, top-p 1
TEMPERATURE = 1.0


@dataclass(frozen=True)
class SampleParams:
    """What changes a text's continuations (besides the text and the run seed)."""

    prefix: float
    top_k: int
    max_new_tokens: int | None
    top_p: float = TOP_P
    temperature: float = TEMPERATURE

    @classmethod
    def of(cls, params: dict) -> SampleParams:
        return cls(float(params["prefix"]), int(params["top_k"]),
                   cap(params["max_new_tokens"]))

    def values(self) -> tuple:
        return astuple(self)

    def label(self) -> str:
        c = 0 if self.max_new_tokens is None else self.max_new_tokens
        return f"prefix={self.prefix:g}, top_k={self.top_k}, max_new_tokens={c}"


def cap(max_new_tokens: int) -> int | None:
    """The continuation cap: None for 0 (the reference code's rule alone: prompt plus
    continuation at most 1024 tokens and the context)."""
    if max_new_tokens < 0:
        raise PddkitError(f"max_new_tokens must be 0 (no cap beyond the 1024-token rule) or "
                          f"more, not {max_new_tokens}")
    return int(max_new_tokens) or None


def check(samples: int, prefix: float, top_k: int, max_new_tokens: int) -> None:
    """One sentence for a hyperparameter samia cannot use."""
    if samples < 1:
        raise PddkitError(f"samples must be at least 1, not {samples}")
    if not 0 < prefix < 1:
        raise PddkitError(f"prefix must be in (0, 1), not {prefix}")
    if top_k < 1:
        raise PddkitError(f"top_k must be at least 1, not {top_k}")
    cap(max_new_tokens)


def split_words(text: str, prefix: float) -> tuple[list[str], list[str]]:
    """(prompt words, reference words): the first floor(prefix * #words) and the rest."""
    words = text.split()
    k = math.floor(prefix * len(words))
    return words[:k], words[k:]


def rouge1_recall(candidate: str, reference: list[str]) -> float:
    """|words(candidate) ∩ reference| (multiset) / #reference."""
    overlap = Counter(candidate.split()) & Counter(reference)
    return sum(overlap.values()) / len(reference)


def zlib_size(candidate: str) -> int:
    return len(_zlib.compress(" ".join(candidate.split()).encode("utf-8")))


def continuations(obs: Observation, samples: int, params) -> tuple[str, ...]:
    """The first `samples` continuations sampled with `params` (a sampling method's key)."""
    got = obs.samples
    if isinstance(got, Mapping):
        got = got[params]
    if not got:
        raise PddkitError("no sampled continuation to score")
    return tuple(got[:samples])


@register_method("samia", needs=(Need.SAMPLES,), requires=("sampling",), named_only=True,
                 reads_target=False, paper="Kaneko et al. 2024",
                 summary="mean ROUGE-1 recall of sampled continuations of the text's first "
                         "half against its second half (no log-probabilities)",
                 cost="+samples sampled continuations per text (<= 1024 tokens with the prompt)")
def samia(obs: Observation, *, samples: int = 10, prefix: float = 0.5, top_k: int = 50,
          zlib: bool = False, max_new_tokens: int = 0) -> float:
    check(samples, prefix, top_k, max_new_tokens)
    prompt, reference = split_words(obs.text, prefix)
    if not prompt or not reference:
        return 0.0  # nothing to recall; never in a run: the sampling pass refuses such texts
    conts = continuations(obs, samples, SampleParams.of(
        {"prefix": prefix, "top_k": top_k, "max_new_tokens": max_new_tokens}))
    values = [rouge1_recall(c, reference) * (zlib_size(c) if zlib else 1) for c in conts]
    return float(sum(values) / len(values))
