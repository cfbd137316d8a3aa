"""Neighbour texts for the neighbourhood attack (Mattern et al. 2023, "Membership inference
attacks against language models via neighbourhood comparison", arXiv 2305.18462, sec. 3 and
their code).

The rule (`neighbor`): for each whole-word position j of the text, the
masked LM, with dropout p on the input embedding at j only (scaled by 1/(1-p)), gives a
distribution p_j over its vocabulary; its candidates are the top_k whole words c != w_j
(the original word). Every (j, c) pair over all positions is ranked by
`p_j(c) / (1 - p_j(w_j))` (the candidate's probability renormalised without the original
word, so positions where the masked LM still predicts w_j are used too), and the
n_neighbors best pairs, each a single-word swap, are the neighbours.

Whole words are told from subword pieces by the tokenizer's own marker (`WordRule`):
byte-level BPE (RoBERTa, GPT-2) and SentencePiece put a word-start marker ('Ġ', '▁') on a
token that starts a word; WordPiece (BERT) marks a continuation ('##'). A position is
replaced only when its token is a whole word that carries the word-start form, and a
candidate only when it has that form too. In byte-level BPE the first word of a text
(and a word right after a newline, quote or bracket, with no space before it) has no
marker: a token without 'Ġ' there cannot be told from a subword piece, so such positions
are not replaced (their candidates would be mostly pieces such as 'ing').

Chinese (`language` zh) has no spaces between words: the words are `jieba`'s
(`pip install -e '.[zh]'`), a position is replaced when its token is exactly one whole
jieba word of Han characters, and its candidates are the vocabulary's tokens made of Han
characters (any word-start form: a character-level model such as bert-base-chinese offers
single characters, a SentencePiece model whole words too).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from pddkit import progress
from pddkit.errors import PddkitError
from pddkit.resources.neighbor_sets import NeighborParams, NeighborSets

logger = logging.getLogger(__name__)

MIN_REST = 1e-12  # 1 - p_j(w_j) is clamped to at least this (a masked LM certain of w_j)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")


@dataclass(frozen=True)
class WordRule:
    """How a tokenizer marks words: `prefix` on word-initial tokens (`marks_start`:
    byte-level BPE 'Ġ', SentencePiece '▁') or on continuation pieces (WordPiece '##')."""

    prefix: str
    marks_start: bool

    def starts_word(self, token: str) -> bool:
        """The token string begins a word (carries the word-start form)."""
        return token.startswith(self.prefix) == self.marks_start

    @classmethod
    def of(cls, tokenizer, name: str = "the masked LM") -> WordRule:
        """Read off the tokenizer: the second word of "a b" shows a word-start prefix;
        without one, a WordPiece model's continuation prefix is used."""
        ids = tokenizer("a b", add_special_tokens=False)["input_ids"]
        last = tokenizer.convert_ids_to_tokens(ids)[-1] if ids else ""
        if last != "b" and last.endswith("b"):
            return cls(last[:-1], True)
        model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
        cont = getattr(model, "continuing_subword_prefix", None)
        if last == "b" and type(model).__name__ == "WordPiece" and cont:
            return cls(cont, False)
        raise PddkitError(f"the tokenizer of {name} marks neither word starts (like 'Ġ' or '▁') "
                          "nor continuations (like '##'), so whole-word candidates cannot be told "
                          "from subword pieces")


@dataclass(frozen=True)
class MaskModel:
    """A fill-mask model with its whole-word vocabulary: `word_key[v]` is an id of token
    v's lower-cased word when v is a whole alphabetic word in the word-start form, else -1
    (so 'ĠThe' and 'Ġthe' share a key and are never each other's candidate)."""

    model: object  # transformers AutoModelForMaskedLM, eval mode
    tokenizer: object
    name: str
    rule: WordRule = field(default=None)  # type: ignore[assignment]
    word_key: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]  # [V]

    def __post_init__(self) -> None:
        if self.rule is None:
            object.__setattr__(self, "rule", WordRule.of(self.tokenizer, self.name))
        if self.word_key is None:
            object.__setattr__(self, "word_key", _word_keys(self.tokenizer, self.rule,
                                                            _vocab_size(self.model, self.tokenizer)))

    @cached_property
    def han_key(self) -> np.ndarray:
        """[V] like `word_key`, for Chinese: a key per token of Han characters only."""
        return _han_keys(self.tokenizer, self.rule, _vocab_size(self.model, self.tokenizer))


def _vocab_size(model, tokenizer) -> int:
    out = getattr(model, "get_output_embeddings", lambda: None)()
    return int(out.weight.shape[0]) if out is not None else len(tokenizer)


def _token_keys(tokenizer, vocab_size: int, keep, word_of) -> np.ndarray:
    """[V] key of each token for which keep(token) holds and word_of(decoded) is a word
    (tokens of the same word share a key); -1 for special tokens and everything else."""
    keys = np.full(vocab_size, -1, dtype=np.int64)
    special = set(tokenizer.all_special_ids)
    ids = range(min(len(tokenizer), vocab_size))
    tokens = tokenizer.convert_ids_to_tokens(list(ids))
    index: dict[str, int] = {}
    for i, t in zip(ids, tokens):
        if i in special or t is None or not keep(t):
            continue
        word = word_of(tokenizer.decode([i]).strip())
        if word is not None:
            keys[i] = index.setdefault(word, len(index))
    return keys


def _word_keys(tokenizer, rule: WordRule, vocab_size: int) -> np.ndarray:
    """[V] key of each token's lower-cased word; -1 for special tokens, subword pieces
    (no word-start form) and anything not alphabetic."""
    return _token_keys(tokenizer, vocab_size, rule.starts_word,
                       lambda w: w.lower() if w.isalpha() else None)


def _han_keys(tokenizer, rule: WordRule, vocab_size: int) -> np.ndarray:
    """[V] key of each token that decodes to Han characters only (the same key for the
    same characters in any word-start form); -1 for special tokens, WordPiece
    continuation pieces ('##...') and anything else."""
    return _token_keys(tokenizer, vocab_size,
                       lambda t: rule.marks_start or not t.startswith(rule.prefix),
                       lambda w: w if _HAN.fullmatch(w) else None)


def load_mask_model(name: str, *, device: str = "cpu", local_files_only: bool = False,
                    trust_remote_code: bool = False) -> MaskModel:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from pddkit.backends.model_source import looks_local

    if looks_local(name) and not Path(name).expanduser().exists():
        raise PddkitError(f"mask model path {name} does not exist")
    try:
        tok = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only,
                                            trust_remote_code=trust_remote_code)
        model = AutoModelForMaskedLM.from_pretrained(name, local_files_only=local_files_only,
                                                     trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"{name} is not a fill-mask (masked LM) model pddkit can load: "
                          f"{first}") from None
    if tok.mask_token_id is None or not getattr(tok, "is_fast", False):
        raise PddkitError(f"{name} is not a fill-mask model: its tokenizer has no mask token "
                          "or no offsets (a fast tokenizer is needed)")
    return MaskModel(model.to(device).eval(), tok, name)


def _seed(text: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{text}".encode()).digest()[:8], "little")


def chinese_words(text: str) -> set[tuple[int, int]]:
    """(start, end) character offsets of the jieba words of `text` made of Han characters
    only: the words a neighbour may replace in Chinese."""
    from pddkit.data.builders.words import word_spans

    return {(a, b) for a, b in word_spans(text, "zh") if _HAN.fullmatch(text[a:b])}


def _word_positions(text: str, offsets: Sequence[tuple[int, int]], tokens: Sequence[str],
                    rule: WordRule, words: set[tuple[int, int]] | None = None) -> list[int]:
    """Token positions that cover one whole alphabetic word in the word-start form; with
    `words` (Chinese: `chinese_words`), those whose token is exactly one of them."""
    if words is not None:
        return [p for p, (s, e) in enumerate(offsets) if e > s and (s, e) in words]
    out = []
    for p, ((s, e), tok) in enumerate(zip(offsets, tokens)):
        if e <= s or not text[s:e].isalpha() or not rule.starts_word(tok):
            continue
        if (s > 0 and text[s - 1].isalnum()) or (e < len(text) and text[e].isalnum()):
            continue
        out.append(p)
    return out


def _masked_probs(mm: MaskModel, ids, positions: list[int], dropout: float, gen):
    """(probs [P, V], rest [P]): the masked LM's distribution at each position, with
    dropout on that position's input embedding only, and 1 - p_j(w_j) (from the logits,
    exact even where p_j(w_j) rounds to 1 in float32)."""
    import torch

    device = ids.device
    with torch.inference_mode():
        emb = mm.model.get_input_embeddings()(ids)  # [1, T, d]
        batch = emb.repeat(len(positions), 1, 1)  # [P, T, d] one copy per position
        keep = (torch.rand(len(positions), emb.shape[-1], generator=gen) >= dropout).float()
        keep = keep.to(device)  # drawn on the CPU generator: the same masks on every device
        rows = torch.arange(len(positions), device=device)
        pos = torch.tensor(positions, device=device)
        batch[rows, pos] = batch[rows, pos] * keep / (1 - dropout)  # dropout on that token only
        mask = torch.ones(batch.shape[:2], dtype=torch.long, device=device)
        logits = mm.model(inputs_embeds=batch, attention_mask=mask).logits[rows, pos].float()
        probs = torch.softmax(logits, -1)  # [P, V]
        others = logits.clone()
        others[rows, ids[0, pos]] = float("-inf")
        rest = torch.exp(torch.logsumexp(others, -1) - torch.logsumexp(logits, -1))  # [P]
    return probs.cpu(), rest.cpu()


def rank_pairs(probs, rest, original, word_key: np.ndarray, top_k: int) -> list[tuple[float, int, int]]:
    """Every (row, candidate) pair, best first, as (score, row, candidate id).

    probs [P, V] masked-LM probabilities per position, rest [P] = 1 - p_j(w_j), original
    [P] the original token ids. Candidates per row: the top_k whole words (word_key >= 0)
    other than the original word (any casing) with p_j(c) > 0; score
    p_j(c) / max(1 - p_j(w_j), MIN_REST). Ties: earlier position, then lower token id."""
    import torch

    key = torch.as_tensor(word_key)  # [V]
    orig = torch.as_tensor(original)  # [P]
    ok = (key[None, :] >= 0) & (key[None, :] != key[orig][:, None])  # [P, V]
    ok[torch.arange(len(orig)), orig] = False
    masked = torch.where(ok, probs, torch.full_like(probs, -1.0))  # [P, V]
    top_p, top_i = masked.topk(min(top_k, masked.shape[-1]), dim=-1)  # [P, k]
    score = top_p.double() / rest.double().clamp_min(MIN_REST)[:, None]  # [P, k]
    pairs = [(float(s), r, int(c))
             for r in range(len(orig))
             for s, p, c in zip(score[r].tolist(), top_p[r].tolist(), top_i[r].tolist()) if p > 0]
    pairs.sort(key=lambda x: (-x[0], x[1], x[2]))
    return pairs


def neighbors_of(mm: MaskModel, text: str, n_neighbors: int = 25, top_k: int = 10,
                 dropout: float = 0.7, seed: int = 0, source: str = "text",
                 language: str | None = None) -> list[str]:
    """The `n_neighbors` best single-word swaps of `text` (module docstring), best first;
    deterministic for a seed. A text with fewer replaceable pairs gets fewer. `language`
    zh finds the words with jieba."""
    import torch

    from pddkit.data.builders.words import is_chinese

    chinese = language is not None and is_chinese(language)

    tok = mm.tokenizer
    enc = tok(text, return_offsets_mapping=True, truncation=True)
    device = next(mm.model.parameters()).device
    ids = torch.tensor([enc["input_ids"]], device=device)  # [1, T]
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    positions = _word_positions(text, offsets, enc.tokens(), mm.rule,
                                chinese_words(text) if chinese else None)
    hint = " (for Chinese, a Chinese `mask_model` such as bert-base-chinese)" if chinese else ""
    if not positions:
        raise PddkitError(f"{source} has no word the masked LM {mm.name} can replace{hint}")
    gen = torch.Generator().manual_seed(_seed(text, seed) % 2**63)
    probs, rest = _masked_probs(mm, ids, positions, dropout, gen)  # [P, V], [P]
    original = [enc["input_ids"][p] for p in positions]
    out, seen = [], set()
    for _, r, cand in rank_pairs(probs, rest, original, mm.han_key if chinese else mm.word_key, top_k):
        s, e = offsets[positions[r]]
        nb = text[:s] + tok.decode([cand]).strip() + text[e:]
        if nb not in seen:
            seen.add(nb)
            out.append(nb)
        if len(out) == n_neighbors:
            break
    if not out:
        raise PddkitError(f"{source} has no word the masked LM {mm.name} can replace{hint}")
    return out


def generate(mm: MaskModel, texts: Sequence[str], names: Sequence[str], n_neighbors: int,
             top_k: int, dropout: float, seed: int,
             language: str | None = None) -> tuple[list[list[str]], int]:
    """Neighbours of every text, and how many texts were longer than the masked LM's
    context: their neighbours stay whole texts, but only words within its first
    `model_max_length` tokens are replaced (counted and reported, not silent).
    `language` zh finds the words with jieba (checked to be installed first)."""
    from pddkit.data.builders.words import is_chinese, word_spans

    if language is not None and is_chinese(language):
        word_spans("", language)  # no jieba: one sentence now, not after the first text
    out = [neighbors_of(mm, t, n_neighbors, top_k, dropout, seed, source=n, language=language)
           for t, n in progress.track(zip(texts, names), len(texts), "neighbours", "text")]
    limit = mm.tokenizer.model_max_length
    lengths = [len(ids) for ids in mm.tokenizer(list(texts), verbose=False)["input_ids"]]
    cut = sum(n > limit for n in lengths)
    if cut:
        logger.warning("neighbor: %d of %d texts are longer than the %d-token context of the "
                       "masked LM %s; only words within it are replaced", cut, len(texts), limit,
                       mm.name)
    return out, cut


def generate_sets(mm: MaskModel, texts: Sequence[str], names: Sequence[str],
                  wanted: Mapping[NeighborParams, int],
                  language: str | None = None) -> tuple[NeighborSets, int]:
    """Neighbours for every parameter set in `wanted` (params -> largest n_neighbors),
    and how many texts were longer than the masked LM's context; `language` zh finds the
    words with jieba."""
    out, cut = {}, 0
    for params, n in wanted.items():
        out[params], cut = generate(mm, texts, names, n, params.top_k, params.dropout, params.seed,
                                    language)
        out[params] = tuple(map(tuple, out[params]))
    return NeighborSets(out, dict(wanted), mm.name), cut


def load(path: str | Path, ids: Sequence[str],
         wanted: Mapping[NeighborParams, int]) -> NeighborSets:
    """Neighbours saved by an earlier run (OUTPUT/neighbors.jsonl), matched by text id and
    parameter set; a set that is missing, or saved with fewer neighbours than asked for,
    is one sentence. Other formats (MIMIR's, one line per text) go to neighbor_files."""
    from pddkit.resources import neighbor_files

    path = Path(path)
    if not path.exists():
        raise PddkitError(f"neighbours file {path} does not exist")
    if not neighbor_files.is_pddkit_file(path):
        found, source = neighbor_files.read_external(path, ids)
        return neighbor_files.as_sets(found, ids, wanted, source)
    saved: dict[NeighborParams, dict[str, list[str]]] = {}
    n_saved: dict[NeighborParams, int] = {}
    mask_model = "?"
    for no, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            obj = json.loads(line)
            if "params" not in obj:
                raise PddkitError(f"{path} line {no} has no `params`: it was written before "
                                  "neighbours were kept per parameter set (and ranked by "
                                  "p(c) / (1 - p(w))); generate them again with a `mask_model`")
            params = NeighborParams.of(obj["params"])
            saved.setdefault(params, {})[str(obj["id"])] = list(obj["neighbors"])
            n_saved[params] = int(obj["n_neighbors"])
            mask_model = str(obj.get("mask_model", mask_model))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            raise PddkitError(f"{path} line {no} is not an {{id, params, n_neighbors, neighbors}} "
                              "object") from None
    texts = {}
    for params, n in wanted.items():
        if params not in saved:
            have = "; ".join(p.label() for p in saved) or "none"
            raise PddkitError(f"{path} has no neighbours for {params.label()} (it holds: {have})")
        if n > n_saved[params]:
            raise PddkitError(f"{path} holds {n_saved[params]} neighbours per text for "
                              f"{params.label()}; n_neighbors={n} asks for more")
        missing = [i for i in ids if i not in saved[params]]
        if missing:
            raise PddkitError(f"{path} has no neighbours for {len(missing)} of the texts with "
                              f"{params.label()} (first: id {missing[0]})")
        texts[params] = tuple(tuple(saved[params][i]) for i in ids)
    return NeighborSets(texts, {p: n_saved[p] for p in wanted}, mask_model)
