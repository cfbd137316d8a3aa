"""The statistics pass: L, H, M2, var, Lmax (and the argmax id, TokenStats.top) for
every text position in one forward; when asked (`tempered=True`), ACMIA's per-text means
of the tempered log-probabilities at its 52 inverse temperatures (TokenStats.tempered),
accumulated chunk by chunk from the same logits.

Texts are sorted by length and batched; the model body runs once per batch; the output
head and the softmax run over the non-padding positions only, in chunks sized so that
memory never holds more than `chunk_bytes` of [positions, vocabulary] floats.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit import progress
from pddkit.backends.hf_loading import LoadedModel
from pddkit.backends.hf_tokenizers import start_token_id
from pddkit.errors import PddkitError
from pddkit.stats import ACMIA_BETAS, TokenStats

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_BYTES = 256 * 2**20
# the tempered sums run over row groups whose [rows, 10, V] float32 block of exponentials
# stays this small, so that its squarings and reductions work in the CPU's cache
TEMPERED_BYTES = 4 * 2**20
FLOAT32_MAX = float(np.finfo(np.float32).max)
D_FLOOR = -1e4  # log p - Lmax below this (only masked entries of the vocabulary) is floored
AUTO_BATCH_CAP = {"cpu": 32, "other": 1024}  # batch_size="auto" tries no more than this


@dataclass(frozen=True)
class Encoded:
    """Token ids of each text (start token not included), after truncation."""

    ids: list[list[int]]
    truncated: list[bool]


def encode(lm: LoadedModel, texts: Sequence[str], names: Sequence[str],
           max_length: int | None = None, what: str = "statistics") -> Encoded:
    """Encode with add_special_tokens=False; cut to the context minus the start token."""
    limit = lm.context_length
    if max_length is not None:
        limit = max_length if limit is None else min(limit, max_length)
    keep = None if limit is None else limit - 1
    if keep is not None and keep < 1:
        raise PddkitError(f"`max_length` {max_length} leaves no room for a text token")
    ids = lm.tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    truncated = []
    for i, seq in enumerate(ids):
        if not seq:
            raise PddkitError(f"{names[i]} encodes to no tokens under the tokenizer of {lm.name}")
        truncated.append(keep is not None and len(seq) > keep)
        if truncated[-1]:
            ids[i] = seq[:keep]
    n_cut = sum(truncated)
    if n_cut:
        logger.warning("%s: %d of %d texts were longer than %d tokens and were truncated (%s)",
                       what, n_cut, len(texts), keep, lm.name)
    return Encoded(ids=ids, truncated=truncated)


def _body_and_head(model):
    """The transformer body (returns final hidden states) and the output head, if separable."""
    head = model.get_output_embeddings()
    body = getattr(model, "base_model", None)
    if head is None or body is None or body is model:
        return None, None
    params = inspect.signature(body.forward).parameters
    return body, {"position_ids": "position_ids" in params, "use_cache": "use_cache" in params}


def _postprocess(config, logits):
    """Logit transforms some families apply after the head (Cohere, Granite, Gemma 2/3)."""
    import torch

    scale = getattr(config, "logit_scale", None)
    if isinstance(scale, (int, float)) and config.model_type.startswith("cohere"):
        logits = logits * scale
    scaling = getattr(config, "logits_scaling", None)
    if isinstance(scaling, (int, float)) and scaling != 1:
        logits = logits / scaling
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def chunk_stats(logits, targets):
    """[C, V] logits, [C] target ids -> (L, H, M2, var, top, Lmax): L, H, M2, var, Lmax
    each [C] float32, top [C] int64 the argmax id of each distribution (`infill`; the first
    on a tie), Lmax = log p(top), the largest log-probability (`gapk`; one gather of C
    numbers from the log-probabilities already computed).

    var = sum_v p (log p + H)^2, not M2 - H^2: the two are equal, but the difference of two
    float32 numbers near H^2 loses every digit of a variance far below H^2, while the sum
    of non-negative terms keeps them (pddkit/stats.py). M2 = var + H^2, a sum of two
    non-negative numbers, exact to float32 rounding. Besides the logits, at most two
    [C, V] float32 arrays are alive (log p, then log p + H squared in place; and p)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)  # [C, V]
    L = logp.gather(1, targets[:, None])[:, 0]  # [C]
    top = logp.argmax(-1)  # [C]
    Lmax = logp.gather(1, top[:, None])[:, 0]  # [C] max_v log p(v), before log p is overwritten
    p = logp.exp()  # [C, V]
    H = -torch.linalg.vecdot(p, logp)  # [C] -sum p log p
    dev = logp.add_(H[:, None]).square_()  # [C, V] (log p + H)^2, in place of log p
    var = torch.linalg.vecdot(p, dev)  # [C] sum p (log p + H)^2
    M2 = var + H * H  # [C]
    return L, H, M2, var, top, Lmax


def tempered_chunk(logits, targets):
    """[C, V] logits, [C] target ids -> (Lb, norm), each [C, 52] float32: per position and
    inverse temperature b of ACMIA_BETAS (SPEC 3e), with d = log p - Lmax (<= 0),
    e = exp(b d) and S = sum_v e (>= 1):
      Lb   = b L - logsumexp_v(b log p)  = b (L - Lmax) - log S
      norm = (Lb - mu) / (sigma + 1e-10) = b ((L - Lmax) - m) / (b sqrt(v) + 1e-10)
    where m = sum e d / S = E_q[log p] - Lmax and v = sum e d^2 / S - m^2 = Var_q[log p],
    q = softmax(b log p): mu = sum q log q = b E_q[log p] - logsumexp and sigma = b sd_q,
    the same numbers without the cancellation of two values near -logsumexp (the moments
    are taken about the mode, d = 0, not about zero). NaN in norm becomes 0 and it is
    clipped to the float32 range (Main_file.py:275).

    The grid doubles b every 10 steps (b_(j+10) = 2 b_j), so exp(b_(j+10) d) = exp(b_j d)^2:
    10 exponentials per position (b_1..b_10) and squarings for the other 41, each block of
    10 reduced (one batched product with [1, d, d^2]) before it is squared in place. Besides
    the logits, [C, V] x 4 and [C, 10, V] float32 are alive."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)  # [C, V]
    L = logp.gather(1, targets[:, None])[:, 0]  # [C]
    Lmax = logp.max(-1).values  # [C]
    # [C, V] log p - Lmax in place of log p; a masked entry (a -inf logit) floored at
    # -1e4, where exp(b d) is 0 for every b > 0 and 0 * d stays 0 (never 0 * -inf)
    d = logp.sub_(Lmax[:, None]).clamp_(min=D_FLOOR)
    moments = torch.stack((d, d * d), 1)  # [C, 2, V] (read transposed: the faster product)
    sums = torch.empty((d.shape[0], len(ACMIA_BETAS), 3), device=d.device)  # [C, 52, 3]
    sums[:, 0, 0] = d.shape[1]  # b = 0: e = 1 everywhere
    sums[:, 0, 1:] = moments.sum(2)
    betas = torch.tensor(ACMIA_BETAS, dtype=torch.float32, device=d.device)  # [52]
    e = torch.mul(betas[None, 1:11, None], d[:, None, :]).exp_()  # [C, 10, V] b_1..b_10
    for lo in range(1, len(ACMIA_BETAS), 10):
        if lo > 1:
            e.square_()  # b_lo.. = 2 x the previous block's
        n = min(10, len(ACMIA_BETAS) - lo)
        sums[:, lo:lo + n, 0] = e[:, :n].sum(-1)  # [C, n] S
        sums[:, lo:lo + n, 1:] = torch.bmm(e[:, :n], moments.transpose(1, 2))  # [C, n, 2]
    S = sums[..., 0]  # [C, 52]
    m = sums[..., 1] / S  # [C, 52]
    v = (sums[..., 2] / S - m * m).clamp_(min=0.0)  # [C, 52]
    gap = (L - Lmax)[:, None]  # [C, 1] <= 0
    Lb = betas * gap - torch.log(S)  # [C, 52]
    norm = betas * (gap - m) / (betas * v.sqrt() + 1e-10)  # [C, 52]
    return Lb, torch.nan_to_num(norm, nan=0.0, posinf=FLOAT32_MAX, neginf=-FLOAT32_MAX)


def first_occurrences(seqs: Sequence[Sequence[int]]) -> np.ndarray:
    """[P] bool over the positions of `seqs` laid end to end: the first occurrence of each
    distinct id within its own sequence (F of SPEC 3e; numpy.unique's return_index)."""
    out = []
    for s in seqs:
        mask = np.zeros(len(s), dtype=bool)
        mask[np.unique(np.asarray(s, dtype=np.int64), return_index=True)[1]] = True
        out.append(mask)
    return np.concatenate(out) if out else np.zeros(0, dtype=bool)


class StatsRunner:
    """Computes TokenStats for a model; one instance per loaded model."""

    def __init__(self, lm: LoadedModel, batch_size: int = 8, padding_side: str = "right",
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, max_length: int | None = None) -> None:
        if batch_size < 1:
            raise PddkitError(f"`batch_size` must be at least 1, not {batch_size}")
        if padding_side not in ("left", "right"):
            raise PddkitError(f"`padding_side` must be 'left' or 'right', not {padding_side!r}")
        self.lm = lm
        self.batch_size = batch_size
        self.padding_side = padding_side
        self.chunk_bytes = chunk_bytes
        self.max_length = max_length
        self.start_id = start_token_id(lm.tokenizer, lm.name)
        self.body, self._accepts = _body_and_head(lm.model)
        self.head = lm.model.get_output_embeddings()
        self._checked = False

    def run(self, texts: Sequence[str], names: Sequence[str] | None = None,
            desc: str = "statistics") -> list[TokenStats]:
        names = names or [f"text {i + 1}" for i in range(len(texts))]
        enc = encode(self.lm, texts, names, self.max_length, what=desc)
        return self.run_ids(enc.ids, enc.truncated, desc=desc)

    def run_ids(self, ids: list[list[int]], truncated: list[bool] | None = None,
                desc: str = "statistics", tempered: bool = False) -> list[TokenStats]:
        """TokenStats of each id sequence; `tempered`: with TokenStats.tempered (acmia)."""
        import torch

        truncated = truncated or [False] * len(ids)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first
        out: list[TokenStats | None] = [None] * len(ids)
        if self.body is not None and not self._checked and ids:
            self._check_head(ids[order[-1]])
        bar = progress.bar(total=sum(len(s) for s in ids), desc=desc, unit="tok")
        with torch.inference_mode():
            for b in range(0, len(order), self.batch_size):
                batch = order[b:b + self.batch_size]
                stats = self._batch([ids[i] for i in batch], tempered=tempered)
                for i, (L, H, M2, var, top, Lmax, temp) in zip(batch, stats):
                    out[i] = TokenStats(np.asarray(ids[i], dtype=np.int64), L, H, M2,
                                        truncated[i], top=top, var=var, Lmax=Lmax,
                                        tempered=temp)
                bar.update(sum(len(ids[i]) for i in batch))
        bar.close()
        return out  # type: ignore[return-value]

    def _inputs(self, seqs: list[list[int]]):
        """Padded [B, T+1] ids with the start token, mask, position ids, prediction mask."""
        import torch

        B, T = len(seqs), max(len(s) for s in seqs) + 1
        input_ids = torch.full((B, T), self.start_id, dtype=torch.long)
        mask = torch.zeros((B, T), dtype=torch.long)
        for r, s in enumerate(seqs):
            row = torch.tensor([self.start_id, *s], dtype=torch.long)
            lo = T - len(row) if self.padding_side == "left" else 0
            input_ids[r, lo:lo + len(row)] = row
            mask[r, lo:lo + len(row)] = 1
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # [B, T]
        # position t predicts token t+1: every real position except each row's last
        predict = mask.clone()
        last = (position_ids * mask).argmax(-1)  # [B] index of each row's last real token
        predict[torch.arange(B), last] = 0
        dev = self.lm.device
        return input_ids.to(dev), mask.to(dev), position_ids.to(dev), predict.bool().to(dev)

    def _hidden(self, input_ids, mask, position_ids):
        """[B, T, d] final hidden states (or [B, T, V] logits when the head is not separable)."""
        if self.body is None:
            return self.lm.model(input_ids=input_ids, attention_mask=mask,
                                 position_ids=position_ids, use_cache=False).logits
        kwargs = {"input_ids": input_ids, "attention_mask": mask}
        if self._accepts["position_ids"]:
            kwargs["position_ids"] = position_ids
        if self._accepts["use_cache"]:
            kwargs["use_cache"] = False
        return self.body(**kwargs)[0]

    def _batch(self, seqs: list[list[int]], tempered: bool = False):
        """Per sequence (L, H, M2, var, top, Lmax, tempered or None)."""
        import torch

        input_ids, mask, position_ids, predict = self._inputs(seqs)
        hidden = self._hidden(input_ids, mask, position_ids)  # [B, T, d|V]
        # targets: the next real token after each predicting position
        nxt = torch.roll(input_ids, shifts=-1, dims=1)  # [B, T]
        h = hidden[predict]  # [P, d] only real positions, row-major = text order
        tgt = nxt[predict]  # [P]
        V = self.head.weight.shape[0] if self.body is not None else hidden.shape[-1]
        chunk = max(1, self.chunk_bytes // (V * 4 * 3))
        parts, tops = [], []
        if tempered:  # per position: its text, and whether it is its id's first occurrence
            first = torch.from_numpy(first_occurrences(seqs)).to(h.device)  # [P]
            row = torch.repeat_interleave(torch.arange(len(seqs)), torch.tensor(
                [len(s) for s in seqs])).to(h.device)  # [P]
            acc = "cpu" if h.device.type == "mps" else h.device  # MPS has no float64
            sums = torch.zeros((len(seqs), 2, len(ACMIA_BETAS)), dtype=torch.float64,
                               device=acc)  # [B, 2, 52]
            group = max(1, TEMPERED_BYTES // (V * 4 * 10))
        for c in range(0, h.shape[0], chunk):
            hc = h[c:c + chunk]
            logits = hc if self.body is None else _postprocess(self.lm.model.config, self.head(hc))
            if tempered:
                at = torch.nonzero(first[c:c + chunk])[:, 0]  # [Cf] rows of first occurrences
                for g in range(0, at.shape[0], group):
                    rows = at[g:g + group]
                    Lb, norm = tempered_chunk(logits[rows], tgt[c:c + chunk][rows])  # [G, 52]
                    sums.index_add_(0, row[c:c + chunk][rows].to(acc),
                                    torch.stack((Lb, norm), 1).to(acc).double())  # [G, 2, 52]
            L, H, M2, var, top, Lmax = chunk_stats(logits, tgt[c:c + chunk])
            parts.append(torch.stack((L, H, M2, var, Lmax), dim=1))  # [C, 5]
            tops.append(top)  # [C]
        flat = torch.cat(parts).float().cpu().numpy()  # [P, 5]
        argmax = torch.cat(tops).to(torch.int64).cpu().numpy()  # [P]
        means = None
        if tempered:  # sums over F -> means over F (|F| >= 1: a sequence is never empty)
            distinct = torch.tensor([len(set(s)) for s in seqs], dtype=torch.float64)
            means = (sums.cpu() / distinct[:, None, None]).numpy()  # [B, 2, 52]
        result, start = [], 0
        for r, s in enumerate(seqs):
            block = flat[start:start + len(s)]
            result.append((block[:, 0].copy(), block[:, 1].copy(), block[:, 2].copy(),
                           block[:, 3].copy(), argmax[start:start + len(s)].copy(),
                           block[:, 4].copy(), None if means is None else means[r].copy()))
            start += len(s)
        return result

    def _check_head(self, seq: list[int]) -> None:
        """Once per model: body + head must reproduce the model's own logits, else fall back."""
        import torch

        self._checked = True
        x = torch.tensor([[self.start_id, *seq[:15]]], device=self.lm.device)
        with torch.inference_mode():
            want = torch.log_softmax(self.lm.model(input_ids=x, attention_mask=torch.ones_like(x),
                                                  use_cache=False).logits.float(), -1)
            hid = self._hidden(x, torch.ones_like(x), torch.arange(x.shape[1])[None].to(x.device))
            got = torch.log_softmax(_postprocess(self.lm.model.config, self.head(hid)).float(), -1)
        if not torch.allclose(want, got, atol=1e-3, rtol=1e-3):
            logger.warning("%s: body + output head do not reproduce the model's logits; using "
                           "full logits per batch (more memory)", self.lm.name)
            self.body = None


def _out_of_memory(e: BaseException) -> bool:
    import torch

    text = str(e).lower()
    return isinstance(e, torch.OutOfMemoryError) or (
        isinstance(e, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text))


def largest_batch(runner: StatsRunner, longest: Sequence[int], n_texts: int) -> int:
    """batch_size="auto": the largest power of two (at most the number of texts, and
    AUTO_BATCH_CAP) for which a batch of copies of the longest text, the most memory any
    batch needs, runs through the statistics pass on the model's device; halved on each
    out-of-memory error. On CPU, where larger batches are not faster and running out of
    memory ends the process instead of raising, the cap is small."""
    import torch

    cap = AUTO_BATCH_CAP["cpu" if str(runner.lm.device).startswith("cpu") else "other"]
    size = 1
    while size * 2 <= min(cap, n_texts):
        size *= 2
    seq = list(longest)
    if runner.body is not None and not runner._checked:
        runner._check_head(seq)
    while True:
        try:
            with torch.inference_mode():
                runner._batch([seq] * size)
            break
        except (RuntimeError, MemoryError) as e:
            if size == 1 or not (isinstance(e, MemoryError) or _out_of_memory(e)):
                raise
            size //= 2
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    logger.info("batch size auto: %d (a batch of the longest text, %d tokens, fits on %s)",
                size, len(seq), runner.lm.device)
    return size
