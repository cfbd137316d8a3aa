"""Multiple-choice answers (`decop`): which of the letters A-D a model answers to a prompt,
and, where the model gives them, the letters' probabilities (softmax over the four letters'
logits or log-probabilities).

`hf` (`hf_choices`): the prompts run in batches, left-padded (attention mask and position
ids from the mask, so that a prompt's logits do not depend on its batch), then greedy
decoding for at most `max_steps` tokens through the key/value cache. The letters'
logits are read at the first step whose greedy token decodes, stripped, to A-D (a model
that first writes a space, a newline or "Answer" is read where it writes the letter), else
at step 1; a row that ends (end token) is not read further. The letter ids are
`tokenizer(letter).input_ids[-1]`, as the authors' 2_decop_hf.py:57-60.

An OpenAI-compatible server (`api_choices`): POST /completions with one token, temperature
0, `logprobs` 4 and `logit_bias` +100 on the four letter ids (2_decop_blackbox.py:27-41);
the top log-probabilities of the four letters give the probabilities. A server that gives
no log-probabilities gives the letter its one token spells (2_decop_blackbox.py:43-49);
one that refuses `logit_bias` is asked without it (one notice).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LETTERS = ("A", "B", "C", "D")
MAX_STEPS = 4  # greedy steps searched for the letter (SPEC 3e)
LOGIT_BIAS = 100  # the authors' bias on the four letters (2_decop_blackbox.py:36)
API_SEED = 2319  # the authors' request seed (2_decop_blackbox.py:34)


@dataclass(frozen=True)
class Choice:
    """One answer. `letter`: the argmax of `probs`, or the letter a server spelled (None when
    its answer is no letter); `probs`: the four letters' probabilities (None when the server
    gives no log-probabilities); `step`: the greedy step (1-based) the letters were read at."""

    letter: str | None
    probs: tuple[float, float, float, float] | None
    step: int = 1

    def to_row(self) -> tuple[str, ...]:
        """Plain strings, for the cache directory (cache/samples.py's store)."""
        probs = "" if self.probs is None else ",".join(repr(float(p)) for p in self.probs)
        return (self.letter or "", probs, str(self.step))

    @classmethod
    def from_row(cls, row: Sequence[str]) -> Choice:
        letter, probs, step = row
        got = None if not probs else tuple(float(p) for p in probs.split(","))
        return cls(letter or None, got, int(step))  # type: ignore[arg-type]


def softmax4(values: Sequence[float]) -> tuple[float, float, float, float]:
    """Softmax over four logits (or log-probabilities; -inf: a letter not given), float64."""
    x = np.asarray(values, dtype=np.float64)
    x = np.exp(x - np.max(x))
    return tuple(float(v) for v in x / x.sum())  # type: ignore[return-value]


def from_letter_scores(values: Sequence[float], step: int = 1) -> Choice:
    probs = softmax4(values)
    return Choice(LETTERS[int(np.argmax(probs))], probs, step)


def letter_ids(tokenizer) -> list[int]:
    """The token id of each letter: the last id of `tokenizer(letter)` (2_decop_hf.py:57-60)."""
    return [int(tokenizer(letter)["input_ids"][-1]) for letter in LETTERS]


def spells_letter(text: str) -> str | None:
    """The letter a generated token spells, stripped ("A", " B", "C\\n"), or None."""
    t = text.strip()
    return t if t in LETTERS else None


def hf_choices(model, tokenizer, prompts: Sequence[Sequence[int]], *, batch_size: int,
               max_steps: int = MAX_STEPS, end_ids: set[int] | None = None,
               on_batch=None) -> list[Choice]:
    """The answer to each prompt (token ids, start token included), in order; batches of
    `batch_size`, longest first. `on_batch(n)` is told of each finished batch."""
    import torch

    from pddkit.backends.cached_forward import cache_arguments, returned_cache
    from pddkit.backends.sampling import _last_logits_only

    ids = letter_ids(tokenizer)
    ends = set(end_ids or ())
    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    out: list[Choice | None] = [None] * len(prompts)
    spelled: dict[int, str] = {}  # token id -> the letter it spells, or "" (memo)

    def letter_of(token: int) -> str | None:
        if token not in spelled:
            spelled[token] = spells_letter(tokenizer.decode([token])) or ""
        return spelled[token] or None

    keep = _last_logits_only(model)  # the prompt's last position only: no [B, T, V] logits
    with torch.inference_mode():
        for b in range(0, len(order), batch_size):
            rows = order[b:b + batch_size]
            width = max(len(prompts[i]) for i in rows)
            pad = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                seq = list(prompts[i])
                pad[r, width - len(seq):] = seq
                mask[r, width - len(seq):] = 1
            input_ids = torch.tensor(pad, device=device)
            attn = torch.tensor(mask, device=device)
            pos = (attn.cumsum(-1) - 1).clamp(min=0)
            out_ = model(input_ids=input_ids, attention_mask=attn, position_ids=pos,
                         use_cache=True, **keep, **cache_arguments(model, None))
            logits = out_.logits[:, -1, :].float()
            cache = returned_cache(out_)
            first = logits[:, ids].double().cpu().numpy()
            found: list[tuple[np.ndarray, int] | None] = [None] * len(rows)
            live = [True] * len(rows)
            for step in range(1, max_steps + 1):
                token = logits.argmax(-1)
                for r, t in enumerate(token.tolist()):
                    if not live[r] or found[r] is not None:
                        continue
                    if letter_of(t) is not None:
                        found[r] = (logits[r, ids].double().cpu().numpy(), step)
                    elif t in ends:
                        live[r] = False
                if step == max_steps or all(f is not None or not a for f, a in zip(found, live)):
                    break
                attn = torch.cat([attn, torch.ones((len(rows), 1), dtype=attn.dtype,
                                                   device=device)], dim=1)
                pos = pos[:, -1:] + 1
                out_ = model(input_ids=token[:, None], attention_mask=attn, position_ids=pos,
                             use_cache=True, **cache_arguments(model, cache))
                cache, logits = returned_cache(out_), out_.logits[:, -1, :].float()
            for r, i in enumerate(rows):
                values, step = found[r] if found[r] is not None else (first[r], 1)
                out[i] = from_letter_scores(values, step)
            if on_batch is not None:
                on_batch(len(rows))
    return out  # type: ignore[return-value]


def read_top(top: dict, tokenizer, ids: Sequence[int]) -> list[float] | None:
    """The four letters' log-probabilities in a top-log-probability entry ({shown token:
    log-probability}; -inf for a letter absent), or None when no letter is there. A letter
    is the entry showing its id's text exactly, else the best entry that strips to it
    (a raw vocabulary entry "ĠA" or "▁A" read as " A")."""
    exact = {tokenizer.decode([i]): n for n, i in enumerate(ids)}
    got = [-math.inf] * 4
    loose = [-math.inf] * 4
    for shown, lp in top.items():
        if lp is None:
            continue
        if shown in exact:
            got[exact[shown]] = max(got[exact[shown]], float(lp))
            continue
        letter = spells_letter(shown.replace("Ġ", " ").replace("▁", " "))
        if letter is not None:
            n = LETTERS.index(letter)
            loose[n] = max(loose[n], float(lp))
    merged = [g if g > -math.inf else lo for g, lo in zip(got, loose)]
    return None if all(v == -math.inf for v in merged) else merged


def api_choices(backend, prompts: Sequence[str], names: Sequence[str]) -> tuple[list[Choice], list[str]]:
    """The answer to each text prompt from the served model behind `backend` (the openai
    backend: its client, prompt form and tokenizer), and the notices of what was worked
    around."""
    from pddkit import progress
    from pddkit.backends.openai_client import RefusedError, run_concurrently
    from pddkit.backends.openai_echo import completion_texts
    from pddkit.backends.openai_probe import as_sent

    _ = backend.server  # the capability probe, once, before the concurrent requests
    enc = backend.encode(list(prompts), list(names), what="decop quiz")
    cut = [n for n, t in zip(names, enc.truncated) if t]
    if cut:
        from pddkit.errors import PddkitError

        raise PddkitError(f"decop: a quiz item of {cut[0]} is longer than the context "
                          f"{backend.name} is served with (the text and its 3 paraphrases are "
                          "all in each item): use shorter texts")
    ids = letter_ids(backend.tokenizer)
    out: list[Choice | None] = [None] * len(prompts)
    state = {"bias": True, "refusal": "", "text_only": 0, "no_letter": 0}
    lock = threading.Lock()
    bar = progress.bar(total=len(prompts), desc="decop quiz", unit="item")

    def one(i: int, stop: threading.Event) -> None:
        seq = enc.ids[i] if backend.server.prompt_form == "ids" else as_sent(backend, (), enc.ids[i])
        rng = random.Random(API_SEED + i)
        while True:
            payload = {"model": backend.name, "prompt": backend._prompt((), seq), "max_tokens": 1,
                       "temperature": 0, "logprobs": 4, "seed": API_SEED}
            if state["bias"]:
                payload["logit_bias"] = {str(t): LOGIT_BIAS for t in ids}
            try:
                answer = backend.client.post(payload, rng, stop)
                break
            except RefusedError as e:
                if "logit_bias" not in payload or "logit_bias" not in e.detail:
                    raise
                with lock:
                    state["bias"], state["refusal"] = False, e.detail.lstrip(": ")
        choice = (answer.get("choices") or [{}])[0]
        lp = choice.get("logprobs") or {}
        tops = lp.get("top_logprobs") or []
        values = read_top(tops[0], backend.tokenizer, ids) if tops and isinstance(tops[0], dict) else None
        if values is not None:
            out[i] = from_letter_scores(values)
        else:
            text = completion_texts(answer, backend.client.url)[0]
            letter = spells_letter(text)
            out[i] = Choice(letter, None)
            with lock:
                state["text_only"] += 1
                state["no_letter"] += letter is None
        with lock:
            bar.update(1)

    try:
        run_concurrently(len(prompts), one, backend.concurrency)
    finally:
        bar.close()
    url = backend.client.url
    notices = []
    if not state["bias"]:
        notices.append(f"the server at {url} refused logit_bias ({state['refusal']}): decop "
                       "asked without it, so its answers may be other tokens than A-D")
    if state["text_only"]:
        notices.append(f"the server at {url} gave no top log-probabilities for "
                       f"{state['text_only']} of {len(prompts)} decop items: their answer is "
                       "the letter it wrote, without probabilities")
    if state["no_letter"]:
        notices.append(f"decop: {state['no_letter']} of {len(prompts)} answers from {url} "
                       "were no letter A-D: they count as not choosing the verbatim passage")
    return out, notices  # type: ignore[return-value]
