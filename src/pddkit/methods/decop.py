"""DE-COP (Duarte et al., ICML 2024, "DE-COP: Detecting Copyrighted Content in Language
Models Training Data"; the authors' code avduarte333/DE-COP_Method at f9e9e54): a
multiple-choice quiz. The model is shown the verbatim passage among three paraphrases of
it, in every order (A-D), and asked which one is verbatim from the named book (or arXiv
paper); a model that saw the passage in training picks it more often than chance (0.25).

Items: the orders of (verbatim, p1, p2, p3) as options A-D, in `itertools.permutations`
order (oversample_labels_fn.py:4-39): all 24 with `permutations=24`, or the 4 rotations
(each option at each letter once) with `permutations=4`. The prompt is SPEC 3e's
(2_decop_hf.py:87-91); `chat=auto` wraps it in the tokenizer's chat template with the
authors' system text (2_decop_hf.py:245-260) where the tokenizer has one.

Score: `score=share` (default): the share of the items answered with the verbatim
passage's letter (3_get_results_blackbox.py:15-16,64-67); `score=prob`: the mean
probability of the verbatim letter (softmax over the four letters), which needs the
letters' log-probabilities. Per document (book): `documents=("mean",)` averages a book's
passages, which is the reference's per-book score. The answers come from
engine/decop_pass.py (backends/choice.py); every difference from the authors' code:
docs/methods/decop.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import permutations as _permutations

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation

LETTERS = ("A", "B", "C", "D")
SCORES = ("share", "prob")
CHAT = ("auto", "yes", "no")
# the authors' system text for chat models (2_decop_hf.py:254-257; the LLaMA2-7B variant's
# format line differs, 249-252)
SYSTEM_TEXT = ("You are entering a multiple choice questions exam. You should directly answer "
               "each question by choosing the correct option. Be concise and straight to the "
               "point in your answer. Output only the letter corresponding to the correct "
               "answer.\n\nFormat your answer as '<correct letter>'.")


def orders(permutations: int) -> tuple[tuple[int, int, int, int], ...]:
    """Which option (0 = verbatim, 1-3 = the paraphrases) stands at A, B, C, D, per item."""
    if permutations == 24:
        return tuple(_permutations(range(4)))  # type: ignore[return-value]
    if permutations == 4:
        return tuple(tuple((k + j) % 4 for j in range(4)) for k in range(4))  # type: ignore[misc]
    raise PddkitError(f"permutations must be 24 (every order) or 4 (the rotations), not "
                      f"{permutations}")


def answer(order: Sequence[int]) -> str:
    """The verbatim passage's letter in an item."""
    return LETTERS[list(order).index(0)]


def question(title: str, author: str | None) -> str:
    """The question's first line: a book by its author, or an arXiv paper (author None)."""
    if author is None:
        return f'Question: Which of the following passages is verbatim from the arXiv paper "{title}"?'
    return f'Question: Which of the following passages is verbatim from the "{title}" book by {author}?'


def prompt(title: str, author: str | None, options: Sequence[str]) -> str:
    """SPEC 3e's prompt with `options` as A-D (2_decop_hf.py:87-91)."""
    lines = "".join(f"{letter}. {text}\n" for letter, text in zip(LETTERS, options))
    return f"{question(title, author)}\nOptions:\n{lines}\nAnswer:"


def check(permutations: int, score: str, chat: str) -> None:
    orders(permutations)
    if score not in SCORES:
        raise PddkitError(f"score must be one of {', '.join(SCORES)}, not {score!r}")
    if chat not in CHAT:
        raise PddkitError(f"chat must be one of {', '.join(CHAT)}, not {chat!r}")


def answers(obs: Observation, permutations: int, chat: str) -> list[tuple[str, str | None, tuple | None]]:
    """(verbatim letter, letter answered or None, the letters' probabilities or None) per item."""
    got = obs.quiz
    if not isinstance(got, Mapping):
        raise PddkitError("no decop answers to score")
    out = []
    for order in orders(permutations):
        letter, probs = got[(chat, order)]
        out.append((answer(order), letter, probs))
    return out


@register_method("decop", needs=(Need.QUIZ,), named_only=True, reads_target=False,
                 paper="Duarte et al. 2024",
                 summary="share of 24 multiple-choice items (the verbatim text among 3 "
                         "paraphrases, every order) answered with the verbatim text",
                 cost="+24 prompts of about 4x the text's tokens, up to 4 greedy tokens each "
                      "(one API call each); 3 paraphrases per text from a file or a paraphraser")
def decop(obs: Observation, *, permutations: int = 24, score: str = "share",
          chat: str = "auto") -> float:
    check(permutations, score, chat)
    items = answers(obs, permutations, chat)
    if score == "share":
        return sum(chosen == right for right, chosen, _ in items) / len(items)
    if any(probs is None for _, _, probs in items):
        raise PddkitError("decop:score=prob needs the letters' log-probabilities, and the "
                          "server gave only the letter: use score=share")
    return sum(probs[LETTERS.index(right)] for right, _, probs in items) / len(items)
