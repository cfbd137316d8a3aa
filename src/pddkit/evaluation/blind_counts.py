"""Term counts of the blind baseline (evaluation/blind.py), computed once for all texts
(label-free), and their TF-IDF per cross-validation fold from the training rows alone.

- `count_matrix`: [n, V] raw counts, columns in the sorted order of the terms, exactly as
  scikit-learn's `CountVectorizer` gives them. Character n-grams within words (`char_wb`,
  n >= 3) are counted with numpy (`char_wb_counts`: every n-gram of a padded word packed
  into one integer, the vocabulary a sort of those integers), several times faster than
  the vectorizer's Python loop and with a fraction of its memory; texts whose alphabet is
  too large to pack fall back to the vectorizer.
- `FoldTfidf`: a fold's vocabulary (terms of its training rows, the `max_features` most
  frequent there), IDF, sublinear tf and l2 norm from the training rows only, which equals
  fitting a `TfidfVectorizer` on the training part. Given the column totals of all rows
  (`column_totals`), a fit on most of the rows subtracts the few rows left out instead of
  summing the many kept; `transform` slices rows and keeps columns by a lookup table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

CHUNK_CHARS = 2_000_000  # characters counted at once by char_wb_counts: memory ~100 x this


def count_matrix(texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int],
                 lowercase: bool, dtype=np.float64) -> sparse.csr_matrix:
    """[n, V] raw term counts of all texts; labels never enter."""
    if analyzer == "char_wb":
        found = char_wb_counts(texts, ngram_range, lowercase, dtype)
        if found is not None:
            return found
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(analyzer=analyzer, ngram_range=ngram_range, lowercase=lowercase,
                          dtype=dtype)
    return vec.fit_transform(list(texts)).tocsr()


def char_wb_counts(texts: Sequence[str], ngram_range: tuple[int, int], lowercase: bool,
                   dtype=np.float64, chunk_chars: int = CHUNK_CHARS) -> sparse.csr_matrix | None:
    """`CountVectorizer(analyzer="char_wb")` counts with numpy, or None where it cannot
    (n-grams shorter than 3 characters, or an alphabet too large to pack `max n` of its
    characters into 64 bits).

    Each word (whitespace-separated) is padded with one space on each side and its n-grams
    never cross it; joined with two spaces between words and texts, an n-gram window is
    inside one padded word exactly when none of its inner characters is a space. A window
    becomes the integer sum_j id(c_j) B^(max_n - 1 - j), ids 1..A in code-point order and
    B = A + 1, so sorting the integers sorts the n-grams as Python sorts strings (a prefix
    first), which is CountVectorizer's column order."""
    lo, hi = ngram_range
    if lo < 3 or hi < lo:
        return None
    docs = [" " + "  ".join((t.lower() if lowercase else t).split()) + " " for t in texts]
    alphabet = sorted(set().union(*map(set, docs))) if docs else [" "]
    base = len(alphabet) + 1
    if base ** hi >= 2 ** 64:
        return None
    lut = np.zeros(ord(alphabet[-1]) + 1, dtype=np.uint64)
    lut[[ord(c) for c in alphabet]] = np.arange(1, base, dtype=np.uint64)
    space = np.uint64(alphabet.index(" ") + 1)
    parts, vocabs, start = [], [], 0
    while start < len(docs) or not parts:
        stop, size = start, 0
        while stop < len(docs) and (size < chunk_chars or stop == start):
            size += len(docs[stop]) + 2
            stop += 1
        part, vocab = _chunk_counts(docs[start:stop], lut, space, base, lo, hi, dtype)
        parts.append(part)
        vocabs.append(vocab)
        start = stop
    vocab = np.unique(np.concatenate(vocabs))                       # [V] sorted codes
    for part, local in zip(parts, vocabs):
        part.indices = np.searchsorted(vocab, local).astype(part.indices.dtype)[part.indices]
        part._shape = (part.shape[0], len(vocab))
    return sparse.vstack(parts, format="csr", dtype=dtype)


def _chunk_counts(docs: list[str], lut: np.ndarray, space: np.uint64, base: int, lo: int,
                  hi: int, dtype) -> tuple[sparse.csr_matrix, np.ndarray]:
    """(counts [len(docs), V_local] with local columns, the V_local sorted codes)."""
    joined = "  ".join(docs)
    ids = lut[np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)]
    starts = np.cumsum([0] + [len(d) + 2 for d in docs[:-1]])        # [n_docs] offsets
    spaces = np.concatenate([[0], np.cumsum(ids == space)])          # [L + 1]
    B = np.uint64(base)
    codes, rows = [], []
    for n in range(lo, hi + 1):
        m = len(ids) - n + 1
        if m <= 0:
            continue
        s = np.flatnonzero(spaces[n - 1:n - 1 + m] - spaces[1:1 + m] == 0)  # no inner space
        code = ids[s].copy()
        for j in range(1, n):
            code = code * B + ids[s + j]
        codes.append(code * B ** np.uint64(hi - n))
        rows.append(np.searchsorted(starts, s, side="right") - 1)
    code = np.concatenate(codes) if codes else np.zeros(0, dtype=np.uint64)
    row = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    vocab = np.unique(code)                                           # [V_local] sorted
    col = np.searchsorted(vocab, code)
    counts = sparse.csr_matrix((np.ones(len(code), dtype=dtype), (row, col)),
                               shape=(len(docs), len(vocab)))
    counts.sum_duplicates()
    return counts, vocab


def column_totals(counts: sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """(document frequency, total count) [V] of every column over all rows."""
    V = counts.shape[1]
    return (np.bincount(counts.indices, minlength=V),
            np.bincount(counts.indices, weights=counts.data, minlength=V))


def _rows_totals(counts: sparse.csr_matrix, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sub = counts[rows]
    return column_totals(sub)


class FoldTfidf:
    """TF-IDF of precomputed counts, fitted on the training rows only.

    `fit(counts, rows, totals) -> self` keeps the terms present in `counts[rows]` (all rows
    when None; the `max_features` most frequent there when given) and their smoothed IDF;
    `totals` (`column_totals(counts)`) lets a fit on most rows subtract the rest.
    `transform(counts, rows)` gives sublinear-tf x IDF of `counts[rows]`, l2-normalised
    over the kept terms, as `TfidfVectorizer(sublinear_tf=True)` fitted on the same
    training texts would.
    """

    def __init__(self, max_features: int | None = None, use_idf: bool = True,
                 sublinear_tf: bool = True, binary: bool = False) -> None:
        self.max_features = max_features
        self.use_idf = use_idf
        self.sublinear_tf = sublinear_tf
        self.binary = binary

    def fit(self, counts: sparse.csr_matrix, rows: np.ndarray | None = None,
            totals: tuple[np.ndarray, np.ndarray] | None = None) -> FoldTfidf:
        n_all = counts.shape[0]
        if rows is None:
            df, tf = totals if totals is not None else column_totals(counts)
            n = n_all
        elif totals is not None and 2 * len(rows) > n_all:  # subtract the rows left out
            out = np.ones(n_all, dtype=bool)
            out[rows] = False
            df_out, tf_out = _rows_totals(counts, np.flatnonzero(out))
            df, tf, n = totals[0] - df_out, totals[1] - tf_out, len(rows)
        else:
            (df, tf), n = _rows_totals(counts, rows), len(rows)
        keep = np.flatnonzero(df > 0)
        if self.max_features is not None and len(keep) > self.max_features:
            keep = np.sort(keep[np.argsort(-tf[keep], kind="stable")[: self.max_features]])
        self.columns_ = keep
        self.lookup_ = np.full(counts.shape[1], -1, dtype=np.int64)  # column -> kept index
        self.lookup_[keep] = np.arange(len(keep))
        self.idf_ = np.log((1.0 + n) / (1.0 + df[keep])) + 1.0 if self.use_idf else None
        return self

    def transform(self, counts: sparse.csr_matrix, rows: np.ndarray | None = None
                  ) -> sparse.csr_matrix:
        from sklearn.preprocessing import normalize

        X = counts if rows is None else counts[rows]
        new = self.lookup_[X.indices]
        kept = new >= 0
        indptr = np.concatenate([[0], np.cumsum(kept)])[X.indptr]
        data = X.data[kept].astype(np.float64)
        if self.binary:
            data[:] = 1.0
        elif self.sublinear_tf:
            data = 1.0 + np.log(data)
        if self.idf_ is not None:
            data *= self.idf_[new[kept]]
        out = sparse.csr_matrix((data, new[kept].astype(np.int32), indptr),
                                shape=(X.shape[0], len(self.columns_)))
        return normalize(out, norm="l2", copy=False)
