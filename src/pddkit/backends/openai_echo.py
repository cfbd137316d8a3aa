"""Reading a completions server's echo: the log-probability of each prompt token, after
checking that the tokens echoed are those pddkit meant to be scored.

Servers lay the echo out in three ways, all read here:
- vLLM's `prompt_logprobs`: one entry per prompt token, the first null, keyed by token id;
- `logprobs` with the start token echoed (`full`): `tokens` and `token_logprobs` begin with
  the start token and its null entry, then the text's tokens, then the generated token;
- `logprobs` with the start token hidden (`start_hidden`, llama-cpp-python): the server
  adds the start token itself and leaves it out of the echo, and OpenAI's convention of a
  null first entry then falls on the text's first token (llama_cpp/llama.py, "Weird
  idiosyncrasy of the OpenAI API": `token_logprobs[0] = None`), so that token's
  log-probability is not given at all: NaN here, and the backend scores each text from its
  second token (openai_api.py).
Which layout a server uses is found once by the capability probe (openai_probe.py); every
answer after it is read with that layout and checked token by token.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from pddkit.errors import PddkitError

_TOKEN_ID = re.compile(r"^token_id:(\d+)$")  # vLLM's --return-tokens-as-token-ids


class NoLogprobsError(PddkitError):
    """The server gives no prompt log-probabilities (it may still sample: `samia`)."""


def refuse(where: str, what: str) -> PddkitError:
    return PddkitError(f"the server at {where} {what}: it does not score the prompt pddkit "
                       "sent (another tokenizer or model behind that name? see `tokenizer`)")


def matches(shown: object, token_id: int, tokenizer) -> bool:
    """Whether an echoed token string stands for `token_id` under `tokenizer`."""
    if not isinstance(shown, str):
        return False
    m = _TOKEN_ID.match(shown)
    if m:
        return int(m.group(1)) == token_id
    text = tokenizer.decode([token_id])
    if "\ufffd" in text:  # part of a character: servers show such bytes in their own ways
        return True
    if shown == "" and text.strip() == "":  # a byte or space token some servers echo as ""
        return True
    # servers show a token raw ("Ġthe", "▁the") or decoded, alone ("the") or in context
    # (" the"): compared without word-start marks and surrounding spaces
    return _bare(shown) in (_bare(text), _bare(tokenizer.convert_ids_to_tokens(token_id)))


def _bare(token: str) -> str:
    return token.replace("\u2581", " ").replace("\u0120", " ").strip()


def first_difference(shown: Sequence, ids: Sequence[int], tokenizer) -> int | None:
    """The first position where the echoed tokens `shown` do not stand for `ids` (compared
    as far as both go), or None."""
    raw = tokenizer.convert_ids_to_tokens([int(t) for t in ids])
    for pos, (s, tok, own) in enumerate(zip(shown, ids, raw)):
        if s != own and not matches(s, int(tok), tokenizer):
            return pos
    return None


def prompt_logprobs(answer: dict, prompt: Sequence[int], where: str, tokenizer=None,
                    layout: str = "full", text_form: bool = False) -> np.ndarray:
    """log P(prompt[i]) for i >= 1 (the tokens after the start token) from a completions
    answer: vLLM's choices[0].prompt_logprobs, else choices[0].logprobs read with `layout`
    (module docstring; `start_hidden` gives NaN for prompt[1]). The echo is checked: the
    null entry first, the ids (vLLM's keys, "token_id:N") or token strings those meant
    (strings when `tokenizer` is given). `text_form`: the server tokenised a text, so a
    difference is worded as a tokenizer mismatch."""
    no_logprobs = NoLogprobsError(f"the server at {where} does not return prompt log-probabilities "
                                  "(echo with logprobs, or vLLM's prompt_logprobs)")
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise PddkitError(f"the server at {where} answered without completion choices")
    choice, n = choices[0], len(prompt)
    vllm = choice.get("prompt_logprobs")
    if vllm:  # [null, {token_id: {"logprob": x, ...}, ...}, ...], one entry per prompt token
        return _vllm(vllm, prompt, where)
    logprobs = choice.get("logprobs") or {}
    token_logprobs = logprobs.get("token_logprobs")
    if not token_logprobs or len(token_logprobs) <= 1:
        raise no_logprobs
    hidden = 1 if layout == "start_hidden" else 0  # prompt tokens not in the echo
    m = n - hidden  # echoed prompt tokens
    tokens = logprobs.get("tokens")
    if tokenizer is not None and tokens:  # the tokens first: a difference is named, not counted
        if len(tokens) != len(token_logprobs):
            raise refuse(where, f"echoed {len(tokens)} tokens with {len(token_logprobs)} "
                                "log-probabilities")
        meant = [int(t) for t in prompt[hidden:]]
        pos = first_difference(tokens, meant, tokenizer)
        if pos is None and len(tokens) < m:
            pos = len(tokens)  # the echo ends before the prompt does
        if pos is not None:
            shown = tokens[pos] if pos < len(tokens) else None
            if text_form:
                raise tokenizer_mismatch(where, pos + hidden, shown, meant[pos], tokenizer)
            raise refuse(where, f"echoed {shown!r} at position {pos + hidden} of {n} where id "
                                f"{meant[pos]} ({tokenizer.decode([meant[pos]])!r}) was sent")
        if text_form and len(tokens) > m + 1:
            raise tokenizer_mismatch(where, m, tokens[m], None, tokenizer)
    if len(token_logprobs) not in (m, m + 1):  # with or without the generated token
        raise PddkitError(f"the server at {where} returned {len(token_logprobs)} log-probabilities "
                          f"for a prompt of {m} tokens (expected {m} or {m + 1}): it does not "
                          "echo the prompt as the OpenAI API does")
    if token_logprobs[0] is not None:
        raise refuse(where, "gave a log-probability for the first echoed token (the start "
                            "token has none, so its echo is not the prompt sent)")
    values = [None] * hidden + list(token_logprobs[:m])  # entry i: prompt[i]
    if any(v is None for v in values[1 + hidden:]):
        raise no_logprobs
    return np.asarray([np.nan if v is None else v for v in values[1:]], dtype=np.float32)


def tokenizer_mismatch(where: str, pos: int, shown: object, tok: int | None,
                       tokenizer) -> PddkitError:
    """The one sentence for a server that tokenised a text otherwise than `tokenizer`:
    `pos` counts the text's tokens from 1 (the start token is 0); `shown` None = the
    server's tokens ended there, `tok` None = the tokenizer's did."""
    theirs = "nothing more" if shown is None else repr(shown)
    ours = "the end of the text" if tok is None else f"{tokenizer.decode([tok])!r} (id {tok})"
    return PddkitError(
        f"the server at {where} tokenises the text otherwise than the local tokenizer"
        f"{_named(tokenizer)}: at token {pos} it has {theirs} where the tokenizer has {ours}, "
        "so its log-probabilities would belong to other tokens; give `tokenizer` the served "
        "model's own tokenizer")


def _named(tokenizer) -> str:
    name = getattr(tokenizer, "name_or_path", "")
    return f" ({name})" if name else ""


def _vllm(entries: list, prompt: Sequence[int], where: str) -> np.ndarray:
    n = len(prompt)
    if len(entries) != n:
        raise PddkitError(f"the server at {where} returned {len(entries)} prompt log-probabilities "
                          f"for a prompt of {n} tokens")
    if entries[0] is not None:
        raise refuse(where, "gave a log-probability for the first prompt token (the start "
                            "token has none)")
    out = []
    for pos, (tok, entry) in enumerate(zip(prompt[1:], entries[1:]), start=1):
        hit = (entry.get(str(tok), entry.get(tok)) if isinstance(entry, dict) else None)
        value = hit.get("logprob") if isinstance(hit, dict) else hit
        if value is None:
            raise refuse(where, f"echoed no log-probability for id {tok} at position {pos} of {n}")
        out.append(value)
    return np.asarray(out, dtype=np.float32)


def generated(answer: dict, where: str) -> tuple[str, float | None, str | None]:
    """(text, log-probability, token string) of the one token a request with max_tokens=1
    and no echo generated; the log-probability and token None when the server gives none."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("text"), str):
        raise PddkitError(f"the server at {where} answered without completion choices: is it an "
                          "OpenAI-compatible completions server?")
    choice = choices[0]
    lp = choice.get("logprobs") or {}
    values, tokens = lp.get("token_logprobs") or [], lp.get("tokens") or []
    value = values[-1] if values and isinstance(values[-1], (int, float)) else None
    return choice["text"], value, (tokens[-1] if tokens else None)


def completion_texts(answer, where: str) -> list[str]:
    """The completion texts of an answer; one sentence when it holds none."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    texts = [c["text"] for c in choices or () if isinstance(c, dict) and isinstance(c.get("text"), str)]
    if not texts:
        raise PddkitError(f"the server at {where} answered a sampling request without "
                          "completion texts")
    return texts
