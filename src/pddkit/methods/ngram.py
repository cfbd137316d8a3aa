"""N-gram coverage attack (Hallinan et al., "The Surprising Effectiveness of Membership
Inference with Simple N-Gram Coverage", CoLM 2025; the authors' code shallinan1/
NGramCoverageAttack at ee53d11): the model continues a few sentences of the text `samples`
times; a text whose true continuation the generations cover with more of their n-grams is
more likely a member. It reads no log-probability, so it runs on any server that samples.

Prompt and reference (SPEC 3e, data/sentences.py): the text's sentences (NLTK punkt, line
by line); sentence 0 is dropped; the prompt is sentences start..start+k-1 with
k = min(sentences, #sentences - start - 1); the reference R is every sentence after. With
`chat=true` the model is sent, through its chat template, the instruction
"Continue the generation as accurately as possible, without any extra text.\\n\\n" and the
prompt (the authors' prompt_formatting.py:341, their default `--task_prompt_idx 1`); a base
model gets the prompt alone.

Score (methods/ngram_coverage.py): per generation, the share of its casual_tokenize words
inside the maximal runs of >= 3 words whose Moses-detokenized text occurs in unidecode(R)
(`stat=coverage`), or the sum over n = 2..12 of that share with runs of >= n words only
(`stat=ci`); aggregated over the samples by `agg` (max, min, median or mean).

Every difference from the authors' code, marked by whether it changes scores:
docs/methods/ngram.md.

Cost per text: one prefill of the prompt and `samples` sampled continuations of at most
`max_new_tokens` tokens (temperature 1, top-p 0.95, no top-k), seeded per text, per distinct
(start, sentences, max_new_tokens, chat); calls differing only in `samples`, `agg` or `stat`
share the continuations; the coverage scan is CPU work, about 2 |g| substring tests.
"""

from __future__ import annotations

import statistics
from dataclasses import astuple, dataclass

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, register_method
from pddkit.methods.samia import continuations
from pddkit.stats import Observation

TOP_P = 0.95  # generate.py:381
TEMPERATURE = 1.0  # generate.py:379
TOP_K = 0  # none (vLLM's top_k=-1, vllm_generate.py:122)
INSTRUCTION = "Continue the generation as accurately as possible, without any extra text.\n\n"
AGGREGATES = {"max": max, "min": min, "median": statistics.median,
              "mean": lambda v: sum(v) / len(v)}
STATS = ("coverage", "ci")


@dataclass(frozen=True)
class NgramSampleParams:
    """What changes a text's continuations (besides the text and the run seed)."""

    start: int
    sentences: int
    max_new_tokens: int
    chat: bool
    top_k: int = TOP_K
    top_p: float = TOP_P
    temperature: float = TEMPERATURE

    @classmethod
    def of(cls, params: dict) -> NgramSampleParams:
        return cls(int(params["start"]), int(params["sentences"]), int(params["max_new_tokens"]),
                   bool(params["chat"]))

    def values(self) -> tuple:
        return ("ngram", *astuple(self))

    def label(self) -> str:
        return (f"start={self.start}, sentences={self.sentences}, "
                f"max_new_tokens={self.max_new_tokens}, chat={str(self.chat).lower()}")


def check(samples: int, agg: str, stat: str, start: int, sentences: int,
          max_new_tokens: int) -> None:
    """One sentence for a hyperparameter ngram cannot use."""
    if samples < 1:
        raise PddkitError(f"samples must be at least 1, not {samples}")
    if agg not in AGGREGATES:
        raise PddkitError(f"agg must be one of {', '.join(AGGREGATES)}, not {agg!r}")
    if stat not in STATS:
        raise PddkitError(f"stat must be coverage or ci, not {stat!r}")
    if start < 0:
        raise PddkitError(f"start must be 0 or more (the first prompt sentence, 0-based), not {start}")
    if sentences < 1:
        raise PddkitError(f"sentences must be at least 1, not {sentences}")
    if max_new_tokens < 1:
        raise PddkitError(f"max_new_tokens must be at least 1, not {max_new_tokens}")


def generation_values(generations, reference: str, stat: str) -> list[float]:
    """coverage (or ci) of each generation against the reference text R."""
    from pddkit.methods.ngram_coverage import coverage_of

    covs = [coverage_of(g, reference) for g in generations]
    return [c.share() if stat == "coverage" else c.index() for c in covs]


@register_method("ngram", needs=(Need.SAMPLES,), requires=("sampling",), named_only=True,
                 reads_target=False, paper="Hallinan et al. 2025",
                 summary="n-gram coverage of the text's next sentences by sampled continuations "
                         "of its sentences 1-3 (no log-probabilities)",
                 cost="+samples sampled continuations per text (<= max_new_tokens each), "
                      "and their n-gram scan (CPU)")
def ngram(obs: Observation, *, samples: int = 20, agg: str = "max", stat: str = "coverage",
          start: int = 1, sentences: int = 3, max_new_tokens: int = 512,
          chat: bool = False) -> float:
    from pddkit.data.sentences import prompt_and_reference

    check(samples, agg, stat, start, sentences, max_new_tokens)
    split = prompt_and_reference(obs.text, start, sentences)
    if split is None:
        return 0.0  # nothing to cover; never in a run: the sampling pass refuses such texts
    conts = continuations(obs, samples, NgramSampleParams.of(
        {"start": start, "sentences": sentences, "max_new_tokens": max_new_tokens, "chat": chat}))
    return float(AGGREGATES[agg](generation_values(conts, split[1], stat)))
