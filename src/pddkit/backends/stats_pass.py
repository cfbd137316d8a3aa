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
from pddkit.backends.tempered_stats import (
    D_FLOOR,
    TEMPERED_BYTES,
    first_occurrences,
    tempered_chunk,
)
from pddkit.errors import PddkitError
from pddkit.stats import ACMIA_BETAS, TokenStats

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_BYTES = 256 * 2**20
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


def rowdot(a, b):
    """[C, V], [C, V] -> [C] sum_v a b per row. On a CPU one batched product, reading each
    once (linalg.vecdot materialises a * b first: three times slower there); elsewhere
    vecdot, which a GPU's TF32 matrix products (torch.backends.cuda.matmul.allow_tf32,
    set_float32_matmul_precision) cannot round to 10 bits."""
    import torch

    if a.device.type == "cpu":
        return (a[:, None, :] @ b[:, :, None])[:, 0, 0]
    return torch.linalg.vecdot(a, b)


def chunk_stats(logits, targets, scratch=None, overwrite: bool = False):
    """[C, V] logits, [C] target ids -> (L, H, M2, var, top, Lmax): L, H, M2, var, Lmax
    each [C] float32, top [C] int64 the argmax id of each distribution (`infill`; the first
    on a tie), Lmax = log p(top), the largest log-probability (`gapk`).

    With m = max_v logit, z = logit - m (<= 0, 0 at the top), e = exp(z), S = sum_v e:
    log p = z - log S, so L = z(target) - log S, Lmax = -log S, and with mu = sum e z / S
    (= E_p[log p] + log S): H = log S - mu, and log p + H = z - mu. var = sum_v p (z - mu)^2,
    a sum of non-negative terms about the mean, not M2 - H^2: the two are equal, but the
    difference of two float32 numbers near H^2 loses every digit of a variance far below H^2,
    while the sum keeps them (pddkit/stats.py). M2 = var + H^2, a sum of two non-negative
    numbers, exact to float32 rounding.

    `overwrite`: float32 `logits` may be overwritten (z, then (z - mu)^2, in place; the
    statistics pass's own logits), else they are copied first. `scratch`: a float32
    [>= C, V] tensor on their device for e (else a new one). With both, one exponential per
    entry and no [C, V] float32 array allocated per call for float32 logits (a copy is made
    of lower-precision ones): on a CPU a fresh array of this size costs as much as the
    arithmetic (its pages are mapped anew each time). A -inf logit (a masked vocabulary
    entry) gets z floored at D_FLOOR, where e = 0 and e z = 0, not NaN."""
    import torch

    # [C, V]: float32 logits themselves (overwrite) or a copy; lower precision: a float32 copy
    z = logits.clone() if logits.dtype == torch.float32 and not overwrite else logits.float()
    m, top = z.max(-1)  # [C], [C] the first argmax on a tie
    z_t = z.gather(1, targets[:, None])[:, 0] - m  # [C] z of the target (-inf if masked)
    z.sub_(m[:, None]).clamp_(min=D_FLOOR)  # [C, V] logit - max, floored
    e = torch.exp(z, out=None if scratch is None else scratch[:z.shape[0]])  # [C, V]
    S = e.sum(-1)  # [C] >= 1
    mu = rowdot(e, z) / S  # [C] E_p[z]
    var = rowdot(e, z.sub_(mu[:, None]).square_()) / S  # [C] E_p[(z - mu)^2]
    log_s = torch.log(S)  # [C]
    H = log_s - mu  # [C]
    M2 = var + H * H  # [C]
    return z_t - log_s, H, M2, var, top, -log_s


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
        self._buffers: dict = {}  # name -> a [rows, V] tensor reused by every chunk

    def chunk_size(self, V: int) -> int:
        """Positions per chunk: three [C, V] float32 arrays within `chunk_bytes`."""
        return max(1, self.chunk_bytes // (V * 4 * 3))

    def _buffer(self, name: str, rows: int, V: int, dtype, device):
        """A [rows, V] tensor kept for the next chunks, as long as the runner (two of them,
        each a third of `chunk_bytes`: at most ~170 MB on the model's device); None outside
        inference mode, where an inference tensor cannot be written."""
        import torch

        if not torch.is_inference_mode_enabled():
            return None
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != V or buf.dtype != dtype \
                or buf.device != device:
            buf = self._buffers[name] = torch.empty((max(rows, self.chunk_size(V)), V),
                                                    dtype=dtype, device=device)
        return buf[:rows]

    def chunk_logits(self, hc):
        """[C, d] final hidden states -> [C, V] logits (the caller's to overwrite): the
        output head's product into a buffer kept across chunks where the head is a plain
        bias-free matrix (most causal LMs), else the head module; `hc` itself when the head
        is not separable (then `hc` is already logits)."""
        import torch

        if self.body is None:
            return hc
        w = self.head.weight
        buf = None
        if type(self.head) is torch.nn.Linear and self.head.bias is None and hc.dtype == w.dtype:
            buf = self._buffer("logits", hc.shape[0], w.shape[0], w.dtype, hc.device)
        out = self.head(hc) if buf is None else torch.mm(hc, w.t(), out=buf)
        return _postprocess(self.lm.model.config, out)

    def chunk_stats(self, logits, targets):
        """chunk_stats with the runner's buffer for the exponentials, overwriting `logits`
        (the runner's own: chunk_logits's buffer, or a masked copy of hidden states)."""
        import torch

        return chunk_stats(logits, targets, self._buffer("exp", logits.shape[0], logits.shape[1],
                                                         torch.float32, logits.device),
                           overwrite=True)

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
        chunk = self.chunk_size(V)
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
            logits = self.chunk_logits(h[c:c + chunk])  # [C, V] (h: a copy, hidden[predict])
            if tempered:
                at = torch.nonzero(first[c:c + chunk])[:, 0]  # [Cf] rows of first occurrences
                for g in range(0, at.shape[0], group):
                    rows = at[g:g + group]
                    Lb, norm = tempered_chunk(logits[rows], tgt[c:c + chunk][rows])  # [G, 52]
                    sums.index_add_(0, row[c:c + chunk][rows].to(acc),
                                    torch.stack((Lb, norm), 1).to(acc).double())  # [G, 2, 52]
            L, H, M2, var, top, Lmax = self.chunk_stats(logits, tgt[c:c + chunk])  # overwrites
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
