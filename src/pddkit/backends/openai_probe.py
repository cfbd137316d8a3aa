"""The capability probe of an OpenAI-compatible server: a few short requests before any
text is sent, finding what the server takes and what it gives, so that a server unable to
give what a method needs is one sentence at the start, never a failure after minutes.

Requests (about 12 tokens each): (1) a greedy one-token completion, with token ids as the
prompt (text when the server refuses ids, or when told to send text); (2) the same prompt
echoed with its log-probabilities: the echo's layout and, with text prompts, whether the
server's tokens are the local tokenizer's; (3) when the echo of (2) leaves out the
generated token, the prompt followed by that token, echoed; (4) the options `n`, `seed`
and top log-probabilities (`logprobs: 5`). The alignment check compares the echo's
log-probability of the generated token with the one the generation itself reported: both
are log P(token | prompt) on a correct server. llama-cpp-python pairs each echoed token
with the distribution of the position after it whenever the prompt does not begin with the
model's BOS token (llama_cpp/llama.py: the echo loop zips `all_tokens` with
`_scores[token_offset:]` and strips only a leading BOS): its echoed numbers are then
well-formed and wrong by 0.1-1 nats, and this check catches them.
"""

from __future__ import annotations

import logging
import random
from dataclasses import asdict, dataclass

from pddkit.backends.openai_client import RefusedError
from pddkit.backends.openai_echo import (
    NoLogprobsError,
    first_difference,
    generated,
    prompt_logprobs,
    refuse,
    tokenizer_mismatch,
)
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

PROBE_TOKENS = 12  # tokens of the canary text the probe sends
# |echoed - generated| log-probability of one token above which the echo is not the
# model's: a server's float noise between a prompt pass and a generation step is at most a
# few 1e-3 nats in float32, 1e-2 in bfloat16; pairing a token with the wrong position
# moves it by 0.1 nats or more (measured on llama-cpp-python: 0.1-0.8)
ALIGNMENT_TOLERANCE = 0.05
PROMPT_FORMS = ("auto", "ids", "text")


@dataclass(frozen=True)
class ServerProbe:
    """What the probe found (results.json: models.target.server)."""

    prompt_form: str  # "ids" or "text": what pddkit sends
    ids_refused: str  # the server's reason for refusing token ids; "" when not refused or not tried
    start: str  # "sent": pddkit sends the start token; "server": the server adds its own
    echo: str | None  # "prompt_logprobs" (vLLM), "full", "start_hidden"; None: no prompt log-probabilities
    no_echo_reason: str  # why there are no prompt log-probabilities ("" when there are)
    alignment_gap: float | None  # |echoed - generated| log-probability of one token; None: not checkable
    top_logprobs: int | None  # top entries returned when 5 were asked; None: refused or not given
    n: bool | None  # the server returns n choices when asked for 2
    seed: bool | None  # the server takes `seed`
    context_length: int | None  # from GET /models; None when the server does not say
    echoed: tuple[float, ...] | None = None  # the echo's log-probabilities of the probe's tokens

    @property
    def prompt_logprobs(self) -> bool:
        return self.echo is not None

    @property
    def first_token(self) -> bool:
        """Whether a text's first token gets a log-probability."""
        return self.echo in ("prompt_logprobs", "full")

    def to_dict(self) -> dict:
        """Plain JSON values (a log-probability not given is None)."""
        out = asdict(self)
        if self.echoed is not None:
            out["echoed"] = [None if x != x else x for x in self.echoed]  # NaN -> None
        return out

    def summary(self, where: str) -> str:
        """One line for the log."""
        form = "token ids" if self.prompt_form == "ids" else "text (the server tokenises)"
        parts = [f"prompts: {form}",
                 "start token: " + ("the server's own" if self.start == "server" else "sent by pddkit")]
        if self.echo is None:
            parts.append(f"prompt log-probabilities: none ({self.no_echo_reason})")
        else:
            parts.append(f"prompt log-probabilities: yes ({self.echo}"
                         + ("" if self.first_token else ", none for a text's first token") + ")")
        if self.alignment_gap is not None and self.echo is not None:
            parts.append(f"echo aligned with generation: within {self.alignment_gap:.1e} nats")
        elif self.echo in ("full", "start_hidden"):
            parts.append("echo aligned with generation: not checkable")
        parts.append(f"top log-probabilities: {self.top_logprobs if self.top_logprobs else 'no'}")
        parts.append(f"n: {_yes(self.n)}, seed: {_yes(self.seed)}")
        parts.append(f"context: {self.context_length if self.context_length else 'not said'}")
        return f"server at {where}: " + "; ".join(parts)


def _yes(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def probe(backend, form: str = "auto") -> ServerProbe:
    """Probe the server behind `backend` (an OpenAIBackend: its client, tokenizer, start
    token and served name); `form`: "auto" (ids, text when refused), "ids" or "text"."""
    if form not in PROMPT_FORMS:
        raise PddkitError(f"`api_prompt` must be one of {', '.join(PROMPT_FORMS)}, not {form!r}")
    client = backend.client
    where = client.url
    rng = random.Random(0)
    context = backend.context_length()
    room = PROBE_TOKENS if context is None else max(1, min(PROBE_TOKENS, context - 3))
    ids = backend.tokenize(backend.canary_text)[:room]
    base = {"model": backend.name, "max_tokens": 1, "temperature": 0}

    # (1) the prompt form, and the generation's own log-probability of its token
    ids_refused, first = "", None
    if form in ("auto", "ids"):
        try:
            try:
                first = client.post({**base, "prompt": [backend.start_id, *ids], "logprobs": 1}, rng)
            except RefusedError:  # `logprobs` refused, or the ids: asked without logprobs
                first = client.post({**base, "prompt": [backend.start_id, *ids]}, rng)
            chosen = "ids"
        except RefusedError as e:
            if form == "ids":
                raise PddkitError(f"the server at {where} refused a prompt of token ids "
                                  f"(HTTP {e.code}{e.detail}): let pddkit send text "
                                  "(`api_prompt` auto or text)") from None
            ids_refused = e.detail.lstrip(": ") or f"HTTP {e.code}"
            logger.info("the server at %s refused a prompt of token ids (%s): pddkit sends "
                        "text, and checks the server's tokens against the tokenizer's",
                        where, ids_refused)
    server_start = _adds_start(backend)
    if first is None:
        chosen = "text"
        first = _first_as_text(backend, base, ids, server_start, rng, ids_refused)
    probe_ = _Probe(backend, chosen, server_start, ids, rng)
    text, lp_gen, shown = generated(first, where)
    text = text if shown is None else shown  # the token as its logprobs name it (special ones too)

    # (2) the echo: its layout, the server's tokens, and (3) its alignment
    echo, reason, gap = probe_.echo(text, lp_gen)
    if echo is None and gap is not None and chosen == "text" and probe_.server_start:
        # misaligned, as a server adding no start token of its own answers a prompt without
        # one (llama-cpp-python): the tokenizer said it would add one; pddkit sends it
        retry = _Probe(backend, chosen, False, ids, rng)
        text2, lp_gen2, shown2 = generated(retry.post(ids, logprobs=1), where)
        text2 = text2 if shown2 is None else shown2
        found = retry.echo(text2, lp_gen2)
        if found[0] is not None:
            logger.info("the server at %s adds no start token to a text prompt (its echo was "
                        "misaligned without one): pddkit sends it", where)
            probe_, (echo, reason, gap) = retry, found
    top, n, seed = probe_.options()
    return ServerProbe(prompt_form=chosen, ids_refused=ids_refused,
                       start="server" if (chosen == "text" and probe_.server_start) else "sent",
                       echo=echo, no_echo_reason=reason, alignment_gap=gap, top_logprobs=top,
                       n=n, seed=seed, context_length=context, echoed=probe_.echoed)


def _adds_start(backend) -> bool:
    """Whether a server tokenising text adds the start token itself: as the tokenizer does
    by default (llama.cpp's GGUF converter and vLLM both take the tokenizer's setting);
    the echo corrects this where it shows the start token."""
    return list(backend.added_prefix_ids()) == [backend.start_id]


def _first_as_text(backend, base: dict, ids: list[int], server_start: bool, rng,
                   ids_refused: str) -> dict:
    client = backend.client
    prompt = text_prompt(backend, [], ids, server_start)
    try:
        return client.post({**base, "prompt": prompt, "logprobs": 1}, rng)
    except RefusedError as e:
        try:  # a server that takes no `logprobs` at all may still sample (samia)
            return client.post({**base, "prompt": prompt}, rng)
        except RefusedError:
            pass
        reason = e.detail.lstrip(": ")
        both = (" and a prompt of token ids" + ("" if ids_refused == reason else f" ({ids_refused})")
                if ids_refused else "")
        raise PddkitError(f"the server at {client.url} refused a text prompt{both} (HTTP "
                          f"{e.code}{e.detail}): is it an OpenAI-compatible completions server "
                          "serving this model?") from None


def text_prompt(backend, prefix, seq, server_start: bool) -> str:
    """The text a server tokenising prompts is sent for the token ids [start] + prefix +
    seq: their decoding, after the start token's own string when the server does not add
    it (servers parse special tokens in prompts: llama.cpp and vLLM both do)."""
    body = backend.tokenizer.decode([*map(int, prefix), *map(int, seq)],
                                    skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if server_start:
        return body
    return backend.tokenizer.decode([backend.start_id], skip_special_tokens=False) + body


def as_sent(backend, prefix, seq: list[int], most: int = 4) -> list[int]:
    """The ids of `seq` a server tokenising text will score when [start] + prefix + seq is
    sent as the text of those ids: `seq` when that text encodes back to prefix + seq; else
    `seq` without its last tokens (at most `most`: a text cut to the context can end in part
    of a character, or in tokens that merge when encoded again, such as two newlines);
    else, without a prefix, the ids its text encodes to. The server's echo is checked
    against what this returns."""
    tok = backend.tokenizer
    head = [int(t) for t in prefix]
    seq = [int(t) for t in seq]
    for k in range(min(most, len(seq) - 1) + 1):
        kept = [*head, *seq[:len(seq) - k]]
        text = tok.decode(kept, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if backend.tokenize(text) == kept:
            return seq[:len(seq) - k]
    if head:
        return seq  # the echo check names the first token that differs
    return backend.tokenize(tok.decode(seq, skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)) or seq


class _Probe:
    """Requests (2)-(4) of `probe`, in the prompt form chosen."""

    def __init__(self, backend, form: str, server_start: bool, ids: list[int], rng) -> None:
        self.backend, self.form, self.server_start = backend, form, server_start
        self.ids, self.rng = ids, rng
        self.where = backend.client.url
        self.echoed: tuple[float, ...] | None = None
        self.last: dict | None = None  # the echo asked again, the start token the server's

    def prompt(self, seq) -> object:
        if self.form == "ids":
            return [self.backend.start_id, *map(int, seq)]
        return text_prompt(self.backend, [], seq, self.server_start)

    def post(self, seq, **options) -> dict:
        payload = {"model": self.backend.name, "prompt": self.prompt(seq), "max_tokens": 1,
                   "temperature": 0, **options}
        return self.backend.client.post(payload, self.rng)

    def echo(self, gen_text: str, lp_gen: float | None) -> tuple[str | None, str, float | None]:
        """(layout, reason when none, alignment gap) of the server's echo."""
        try:
            answer = self.post(self.ids, echo=True, logprobs=1)
        except RefusedError as e:
            return None, f"echo with logprobs refused: HTTP {e.code}{e.detail}", None
        layout = self.layout(answer)
        if layout is None:
            return None, "its answer to echo with logprobs holds none", None
        if self.last is not None:  # asked again without a start token of pddkit's: so is the
            answer = self.last  # generation the echo is compared with
            gen_text, lp_gen, shown = generated(self.post(self.ids, logprobs=1), self.where)
            gen_text = gen_text if shown is None else shown
        L = prompt_logprobs(answer, [self.backend.start_id, *self.ids], self.where,
                            self.backend.tokenizer,
                            "full" if layout == "prompt_logprobs" else layout,
                            text_form=self.form == "text")
        self.echoed = tuple(float(x) for x in L)
        if layout == "prompt_logprobs":
            return layout, "", None
        gap = self.alignment(answer, layout, gen_text, lp_gen)
        if gap is not None and gap > ALIGNMENT_TOLERANCE:
            return None, (f"its echoed log-probabilities are not the model's: the token it "
                          f"generated, {gen_text!r}, is {gap:.2f} nats apart in its echo and in "
                          "its generation, as when each echoed token is paired with another "
                          "position's distribution"), gap
        return layout, "", gap

    def layout(self, answer: dict) -> str | None:
        """"prompt_logprobs", "full" or "start_hidden" (openai_echo), None without
        log-probabilities; the start token's handling corrected from the echo."""
        choice = (answer.get("choices") or [{}])[0] if isinstance(answer, dict) else {}
        if choice.get("prompt_logprobs"):
            return "prompt_logprobs"
        lp = choice.get("logprobs") or {}
        tokens, values = lp.get("tokens") or [], lp.get("token_logprobs") or []
        if len(values) <= 1:
            return None
        tok, start = self.backend.tokenizer, self.backend.start_id
        meant = [start, *self.ids]
        if tokens and first_difference(tokens[:2], [start, start], tok) is None:
            if self.form == "text" and not self.server_start:  # it added one to ours
                self.server_start = True
                self.last = self.post(self.ids, echo=True, logprobs=1)
                return self.layout(self.last)
            raise PddkitError(f"the server at {self.where} put a second start token before the "
                              "prompt's (it adds its own to token ids too): let pddkit send "
                              "text (`api_prompt` text)")
        if not tokens:  # nothing to align by: read as the OpenAI API lays it out
            return "full"
        if first_difference(tokens, meant, tok) is None:
            return "full"
        if first_difference(tokens, self.ids, tok) is None:
            return "start_hidden"
        # the start token shown first, or not: the first token that differs, named
        lead = 1 if first_difference(tokens[:1], [start], tok) is None else 0
        pos = first_difference(tokens[lead:], self.ids, tok)
        pos = min(len(self.ids), len(tokens) - lead) - 1 if pos is None else pos  # cut short
        shown, meant_id = tokens[lead + pos], self.ids[pos]
        if self.form == "text":
            raise tokenizer_mismatch(self.where, pos + 1, shown, meant_id, tok)
        raise refuse(self.where, f"echoed {shown!r} at position {pos + 1} of {len(meant)} where "
                                 f"id {meant_id} ({tok.decode([meant_id])!r}) was sent")

    def alignment(self, answer: dict, layout: str, gen_text: str,
                  lp_gen: float | None) -> float | None:
        """|echoed - generated| log-probability of the generated token, from this echo when
        it holds the generated token, else from an echo of the prompt followed by it."""
        if lp_gen is None:
            return None
        values = answer["choices"][0]["logprobs"]["token_logprobs"]
        shown = len(self.ids) + (1 if layout == "full" else 0)  # echoed prompt tokens
        if len(values) == shown + 1 and values[-1] is not None:
            return abs(float(values[-1]) - float(lp_gen))
        tok = self.backend.tokenizer
        if self.form == "ids":  # the generated token's id
            one = token_id_of(gen_text, tok, self.backend.tokenize)
            longer = [] if one is None else [*self.ids, one]
        else:  # the prompt's text and the generated text, as the server will tokenise them
            longer = self.backend.tokenize(tok.decode(self.ids, skip_special_tokens=False) + gen_text)
        if longer[:len(self.ids)] != self.ids or len(longer) != len(self.ids) + 1:
            return None  # the generated text does not extend the prompt by one token
        try:
            again = self.post(longer, echo=True, logprobs=1)
            L = prompt_logprobs(again, [self.backend.start_id, *longer], self.where, tok, layout,
                                text_form=self.form == "text")
        except (RefusedError, NoLogprobsError):
            return None
        return abs(float(L[-1]) - float(lp_gen))

    def options(self) -> tuple[int | None, bool | None, bool | None]:
        """(top log-probabilities returned of 5 asked, n honoured, seed taken)."""
        both = {"n": 2, "seed": 0, "logprobs": 5, "temperature": 1.0}
        try:
            answer = self.post(self.ids, **both)
            return _top(answer), len(answer.get("choices") or ()) == 2, True
        except RefusedError:
            pass
        found = []
        for options in ({"logprobs": 5}, {"n": 2, "temperature": 1.0}, {"seed": 0}):
            try:
                answer = self.post(self.ids, **options)
            except RefusedError:
                found.append(None if "logprobs" in options else False)
                continue
            found.append(_top(answer) if "logprobs" in options
                         else (len(answer.get("choices") or ()) == 2 if "n" in options else True))
        return found[0], found[1], found[2]


def token_id_of(shown: str, tokenizer, tokenize) -> int | None:
    """The id of a token a server names by `shown`: vLLM's "token_id:N", a raw vocabulary
    entry ("Ġthe"), or a text that the tokenizer encodes as one token; None otherwise."""
    if shown.startswith("token_id:") and shown[9:].isdigit():
        return int(shown[9:])
    raw = tokenizer.convert_tokens_to_ids(shown)
    if isinstance(raw, int) and raw != tokenizer.unk_token_id and raw is not None:
        return raw
    one = tokenize(shown)
    return one[0] if len(one) == 1 else None


def _top(answer: dict) -> int | None:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    lp = (choices[0].get("logprobs") or {}) if choices and isinstance(choices[0], dict) else {}
    tops = lp.get("top_logprobs") or []
    last = tops[-1] if tops else None
    return len(last) if isinstance(last, dict) and last else None
