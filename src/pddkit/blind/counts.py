"""Term counts of the blind baseline (blind/baseline.py), computed once for all texts
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
from itertools import chain

import numpy as np
from scipy import sparse

from pddkit.blind.requirements import TOKEN_RE

CHUNK_CHARS = 2_000_000  # characters counted at once by char_wb_counts: memory ~100 x this
CHUNK_DOCS = 20000  # texts tokenised at once by word_counts


def count_matrix(texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int],
                 lowercase: bool, dtype=np.float64) -> sparse.csr_matrix:
    """[n, V] raw term counts of all texts; labels never enter."""
    texts = list(texts)
    found = None
    if analyzer == "char_wb":
        found = char_wb_counts(texts, ngram_range, lowercase, dtype)
    elif analyzer == "word":
        found = word_counts(texts, ngram_range, lowercase, dtype)
    if found is not None:
        return found
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(analyzer=analyzer, ngram_range=ngram_range, lowercase=lowercase,
                          dtype=dtype)
    return vec.fit_transform(texts).tocsr()


def char_wb_counts(texts: Sequence[str], ngram_range: tuple[int, int], lowercase: bool,
                   dtype=np.float64, chunk_chars: int = CHUNK_CHARS) -> sparse.csr_matrix | None:
    """`CountVectorizer(analyzer="char_wb")` counts with numpy, or None where it cannot
    (n-grams shorter than 3 characters, an alphabet too large to pack `max n` of its
    characters into 64 bits, or no n-gram at all: the vectorizer says so).

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

    def chunks():
        start = 0
        while start < len(docs):
            stop, size = start, 0
            while stop < len(docs) and (size < chunk_chars or stop == start):
                size += len(docs[stop]) + 2
                stop += 1
            yield _char_codes(docs[start:stop], lut, space, base, lo, hi)
            start = stop

    return _from_codes(chunks(), dtype)


def _char_codes(docs: list[str], lut: np.ndarray, space: np.uint64, base: int, lo: int,
                hi: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(number of docs, packed n-gram codes, their docs) of one chunk of padded texts."""
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
    return len(docs), _cat(codes, np.uint64), _cat(rows, np.int64)


def word_counts(texts: Sequence[str], ngram_range: tuple[int, int], lowercase: bool,
                dtype=np.float64, chunk_docs: int = CHUNK_DOCS) -> sparse.csr_matrix | None:
    """`CountVectorizer(analyzer="word")` counts (default token pattern, no stop words) with
    numpy, or None where it cannot (too many distinct words to pack `max n` of them into 63
    bits, or no word at all: the vectorizer says so).

    Words get ids 1..U in sorted order; an n-gram is the integer sum_j id_j (U + 1)^(max_n
    - 1 - j). Words are made of word characters, which all sort after the space that
    joins them, so sorting these integers sorts the n-grams as strings (a prefix first),
    CountVectorizer's column order. Two passes over the texts: the words, then the counts."""
    lo, hi = ngram_range
    if lo < 1 or hi < lo:
        return None
    texts = list(texts)

    def tokens(part):
        return [TOKEN_RE.findall(t.lower() if lowercase else t) for t in part]

    words: set[str] = set()
    for start in range(0, len(texts), chunk_docs):
        words.update(chain.from_iterable(tokens(texts[start:start + chunk_docs])))
    base = len(words) + 1
    if base ** hi >= 2 ** 63:
        return None
    index = {w: i for i, w in enumerate(sorted(words), 1)}

    def chunks():
        for start in range(0, len(texts), chunk_docs):
            toks = tokens(texts[start:start + chunk_docs])
            lengths = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
            ids = np.fromiter(map(index.__getitem__, chain.from_iterable(toks)),
                              dtype=np.int64, count=int(lengths.sum()))  # [tokens]
            doc = np.repeat(np.arange(len(toks)), lengths)
            end = np.cumsum(lengths)[doc]                  # [tokens] end of each one's text
            codes, rows = [], []
            for n in range(lo, hi + 1):
                s = np.flatnonzero(np.arange(len(ids)) + n <= end)
                code = ids[s].copy()
                for j in range(1, n):
                    code = code * base + ids[s + j]
                codes.append(code * base ** (hi - n))
                rows.append(doc[s])
            yield len(toks), _cat(codes, np.int64), _cat(rows, np.int64)

    return _from_codes(chunks(), dtype)


def _cat(arrays: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)


def _from_codes(chunks, dtype) -> sparse.csr_matrix | None:
    """[n_docs, V] counts from (docs, codes, their docs) chunks: columns are the distinct
    codes in sorted order; None when there is none."""
    parts, vocabs = [], []
    for docs, code, row in chunks:
        vocab = np.unique(code)                                       # [V_local] sorted
        part = sparse.csr_matrix((np.ones(len(code), dtype=dtype),
                                  (row, np.searchsorted(vocab, code))), shape=(docs, len(vocab)))
        part.sum_duplicates()
        parts.append(part)
        vocabs.append(vocab)
    vocab = np.unique(np.concatenate(vocabs)) if vocabs else np.zeros(0)  # [V] sorted
    if not len(vocab):
        return None
    parts = [sparse.csr_matrix((part.data, np.searchsorted(vocab, local)[part.indices],
                                part.indptr), shape=(part.shape[0], len(vocab)))
             for part, local in zip(parts, vocabs)]
    return sparse.vstack(parts, format="csr", dtype=dtype)


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
        self.lookup_ = np.full(counts.shape[1], -1, dtype=np.int32)  # column -> kept index
        self.lookup_[keep] = np.arange(len(keep), dtype=np.int32)
        self.idf_ = np.log((1.0 + n) / (1.0 + df[keep])) + 1.0 if self.use_idf else None
        return self

    def transform(self, counts: sparse.csr_matrix, rows: np.ndarray | None = None
                  ) -> sparse.csr_matrix:
        return stacked_transform([(self, counts)], rows)

    def kept_per_row(self, counts: sparse.csr_matrix) -> np.ndarray:
        """[n] how many of each row's terms the fold keeps."""
        kept = self.lookup_[counts.indices] >= 0
        starts, filled = counts.indptr[:-1], np.diff(counts.indptr) > 0
        out = np.zeros(counts.shape[0], dtype=np.int64)
        if kept.size:
            out[filled] = np.add.reduceat(kept, starts[filled], dtype=np.int64)
        return out

    def chunk_arrays(self, X: sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(data, kept column, indptr) of rows `X` of the counts: sublinear tf x IDF of the
        kept terms, each row l2-normalised."""
        from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

        new = self.lookup_[X.indices]
        kept = new >= 0
        indptr = np.concatenate([[0], np.cumsum(kept)])[X.indptr]
        data = X.data[kept].astype(np.float64)
        if self.binary:
            data[:] = 1.0
        elif self.sublinear_tf:
            np.log(data, out=data)
            data += 1.0
        cols = new[kept]
        if self.idf_ is not None:
            data *= self.idf_[cols]
        inplace_csr_row_normalize_l2(sparse.csr_matrix((data, cols, indptr),
                                                       shape=(X.shape[0], len(self.columns_))))
        return data, cols, indptr


def stacked_transform(blocks: list[tuple[FoldTfidf, sparse.csr_matrix]],
                      rows: np.ndarray | None = None, chunk: int = 8192) -> sparse.csr_matrix:
    """[len(rows), sum of kept columns] each (fitted FoldTfidf, counts) block's transform of
    `counts[rows]`, side by side (each block l2-normalised on its own, as an hstack of the
    blocks' transforms). The result is allocated once and filled `chunk` rows at a time,
    so the memory beyond it is one chunk's."""
    n_all = blocks[0][1].shape[0]
    rows = np.arange(n_all) if rows is None else np.asarray(rows)
    kept = [t.kept_per_row(counts)[rows] for t, counts in blocks]     # [len(rows)] each
    indptr = np.concatenate([[0], np.cumsum(np.sum(kept, axis=0))])   # [len(rows) + 1]
    data = np.empty(indptr[-1], dtype=np.float64)
    indices = np.empty(indptr[-1], dtype=np.int32)
    first_col = np.cumsum([0] + [len(t.columns_) for t, _ in blocks])
    for lo in range(0, len(rows), chunk):
        r = rows[lo:lo + chunk]
        slot = indptr[lo:lo + len(r)].copy()                          # next free slot per row
        for (t, counts), col0 in zip(blocks, first_col):
            d, c, ip = t.chunk_arrays(counts[r])
            counts_per_row = np.diff(ip)
            row = np.repeat(np.arange(len(r)), counts_per_row)
            pos = slot[row] + np.arange(len(d)) - ip[row]
            data[pos], indices[pos] = d, c + col0
            slot += counts_per_row
    return sparse.csr_matrix((data, indices, indptr), shape=(len(rows), int(first_col[-1])))
