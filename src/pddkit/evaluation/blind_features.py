"""Features of the blind baseline (evaluation/blind.py), each computable per cross-validation
fold from the training part alone.

- `date_features`: the years and dates a text mentions (Das et al. 2024's date detection):
  every year 1000-2099 and its decade, the largest and smallest year, step indicators
  "largest year >= T" / "smallest year >= T" (so a linear model can learn a cut-off),
  how many years, and whether a month appears with a year or a full date is written out;
  and the newest year the text cites (`citation_years`: LaTeX citation keys such as
  `\\cite{vaswani2017attention}`, author-year citations, reference-list entries), as
  Das et al. do for arXiv papers, with step indicators like the years' and a missing
  indicator (`no_cite_year`) for the texts that cite nothing.
- `FoldTfidf`: term counts of all texts are counted once (label-free); each fold's
  vocabulary (terms of its training texts, the `max_features` most frequent there), IDF,
  sublinear tf and l2 norm come from the training rows only, which equals fitting a
  `TfidfVectorizer` on the training part, at a fraction of the cost.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december"
          "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
# A year 1000-2099 (also "1990s"), not part of a longer number, a price or a decimal.
YEAR_RE = re.compile(r"(?<![\d.,$£€#])\b(1\d{3}|20\d{2})(?:s\b|\b)(?![.,]\d)")
MONTH_YEAR_RE = re.compile(rf"\b(?:{MONTHS})\.?\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?(1\d{{3}}|20\d{{2}})\b",
                           re.IGNORECASE)
DAY_MONTH_YEAR_RE = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{MONTHS})\.?,?\s+(1\d{{3}}|20\d{{2}})\b", re.IGNORECASE)
FULL_DATE_RE = re.compile(
    rf"\b(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+(?:1\d{{3}}|20\d{{2}})\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{MONTHS})\.?,?\s+(?:1\d{{3}}|20\d{{2}})\b"
    r"|\b(?:1\d{3}|20\d{2})-\d{2}-\d{2}\b",
    re.IGNORECASE)
# Cut-offs for the step indicators: centuries before 1900, every second year after.
THRESHOLDS = tuple(range(1100, 1900, 100)) + tuple(range(1900, 2100, 2))

# Citations (Das et al.'s arXiv date detection: the newest year a paper cites).
# LaTeX citation commands: \cite, \citep, \citet, \citealp, \parencite, \textcite, ...
CITE_RE = re.compile(r"\\[A-Za-z]*cite[A-Za-z]*\*?\s*(?:\[[^\]]*\]\s*){0,2}\{([^{}]*)\}")
KEY_YEAR4_RE = re.compile(r"(?<!\d)(1\d{3}|20\d{2})(?!\d)")
# a two-digit year only in keys shaped author + 2 digits (+ words): smith19, he16deep
KEY_YEAR2_RE = re.compile(r"^[A-Za-z][A-Za-z'_.:-]+?(\d{2})(?:[A-Za-z_.:-][A-Za-z_.:-]*)?$")
# author-year citations outside brackets: "Smith et al., 2019", "et al. 2019a"
ET_AL_RE = re.compile(r"\bet\s+al\.?,?\s*(1\d{3}|20\d{2})[a-z]?\b")
BRACKETED_RE = re.compile(r"[(\[]([^()\[\]]{1,160})[)\]]")
# one item of a bracketed citation: "(2019)", "(Smith, 2019; Lee 2020a)", "[SODA 2014]"
CITE_ITEM_RE = re.compile(r"^\s*(?:([A-Z][^;]{0,80}?)[,\s]\s*)?(1\d{3}|20\d{2})[a-z]?\s*$")
MONTH_ONLY_RE = re.compile(rf"^(?:{MONTHS})\.?$", re.IGNORECASE)
# a reference-list entry: "[12] A. Smith. Title. 2019." or "\bibitem{key} ...", one line
REFERENCE_LINE_RE = re.compile(r"^\s*(?:\[\d{1,3}\]|\\bibitem\b)", re.MULTILINE)


def years_in(text: str) -> list[int]:
    """The years 1000-2099 a text mentions, in order of appearance."""
    return [int(y) for y in YEAR_RE.findall(text)]


def _key_year(key: str) -> int | None:
    """The year in one citation key (vaswani2017attention, smith19), or None."""
    found = KEY_YEAR4_RE.findall(key)
    if found:
        return max(int(y) for y in found)
    m = KEY_YEAR2_RE.match(key)
    if m:
        d = int(m.group(1))
        return 2000 + d if d <= 29 else 1900 + d if d >= 70 else None
    return None


def citation_years(text: str) -> tuple[list[int], bool, bool]:
    """(years cited, a LaTeX citation command seen, a reference-list entry seen): years in
    LaTeX citation keys (`\\cite{smith2019, lee20}`), author-year citations ("et al.,
    2019", "(Smith 2019; Lee, 2020a)", a bare "(2019)" after a name) and reference-list
    entries ("[12] ... 2019.", `\\bibitem`)."""
    years: list[int] = []
    commands = CITE_RE.findall(text)
    for keys in commands:
        years += [y for y in (_key_year(k.strip()) for k in keys.split(",")) if y is not None]
    for inside in BRACKETED_RE.findall(text):
        for item in inside.split(";"):
            m = CITE_ITEM_RE.match(item)
            if m and not (m.group(1) and MONTH_ONLY_RE.match(m.group(1).strip(" ,"))):
                years.append(int(m.group(2)))
    # "et al., 2019" outside brackets (inside them it is an item above)
    years += [int(y) for y in ET_AL_RE.findall(BRACKETED_RE.sub(" ", text))]
    entries = REFERENCE_LINE_RE.findall(text)
    if entries:
        for line in text.splitlines():
            if REFERENCE_LINE_RE.match(line):
                years += years_in(line)
    return years, bool(commands), bool(entries)


def date_features(text: str, citations: bool = True) -> dict[str, float]:
    """Sparse named features of the years and dates in one text (see module docstring);
    `citations=False` leaves out the cited years."""
    years = years_in(text)
    f: dict[str, float] = {}
    if not years:
        f["no_year"] = 1.0
    else:
        f["has_year"] = 1.0
        f["log_n_years"] = math.log1p(len(years))
        hi, lo = max(years), min(years)
        for y in set(years):
            f[f"year={y}"] = 1.0
            f[f"decade={y // 10 * 10}s"] = 1.0
        f[f"max_year={hi}"] = 1.0
        f[f"max_decade={hi // 10 * 10}s"] = 1.0
        f[f"min_decade={lo // 10 * 10}s"] = 1.0
        for t in THRESHOLDS:
            if hi >= t:
                f[f"max_year>={t}"] = 1.0
            if lo >= t:
                f[f"min_year>={t}"] = 1.0
    month_years = [int(y) for y in MONTH_YEAR_RE.findall(text) + DAY_MONTH_YEAR_RE.findall(text)]
    if month_years:
        f["month_with_year"] = 1.0
        f[f"max_month_year_decade={max(month_years) // 10 * 10}s"] = 1.0
    if FULL_DATE_RE.search(text):
        f["full_date"] = 1.0
    if not citations:
        return f
    cited, latex, references = citation_years(text)
    if latex:
        f["latex_cite"] = 1.0
    if references:
        f["reference_list"] = 1.0
    if not cited:  # the missing indicator: most texts cite nothing
        f["no_cite_year"] = 1.0
    else:
        newest = max(cited)
        f["log_n_cite_years"] = math.log1p(len(cited))
        f[f"cite_max_year={newest}"] = 1.0
        for t in THRESHOLDS:
            if newest >= t:
                f[f"cite_max_year>={t}"] = 1.0
    return f


STYLE_NAMES = ("log_chars", "log_words", "mean_word_length", "first_line_words", "lines_per_word",
               "sentences_per_word", "upper_share", "digit_share", "punct_share", "dollar_share",
               "non_ascii_share",
               # stylometry: how sentences and words are built
               "first_line_chars", "first_line_colon", "words_per_sentence", "word_length_std",
               "long_word_share", "function_word_share", "type_token_ratio",
               "first_person_share", "capitalised_share", "ing_share", "ly_share",
               "comma_share", "paren_share", "hyphen_share")
FIRST_PERSON = frozenset(("i", "me", "my", "we", "us", "our", "ours"))
LONG_WORD = 10  # characters


def style_features(text: str) -> list[float]:
    """Length, typography and stylometry of one text (`STYLE_NAMES`): a shift in how texts
    are written or cut (longer, more mathematics, other line breaks, longer words, fewer
    function words, titles with a colon) shows here. Shares are per word or per character;
    function words are scikit-learn's English stop words."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = text.split()
    n_chars, n_words = max(len(text), 1), max(len(words), 1)
    lines = text.split("\n")
    n_sentences = len(re.findall(r"[.!?](?:\s|$)", text))
    lengths = np.array([len(w) for w in words]) if words else np.zeros(1)
    bare = [w.strip(".,;:!?()[]{}\"'").lower() for w in words]
    bare = [w for w in bare if w]  # a token of punctuation alone is no word type
    return [math.log1p(len(text)), math.log1p(len(words)),
            sum(len(w) for w in words) / n_words, float(len(lines[0].split())),
            len(lines) / n_words, n_sentences / n_words,
            sum(c.isupper() for c in text) / n_chars, sum(c.isdigit() for c in text) / n_chars,
            sum(not c.isalnum() and not c.isspace() for c in text) / n_chars,
            text.count("$") / n_chars, sum(ord(c) > 127 for c in text) / n_chars,
            math.log1p(len(lines[0])), float(":" in lines[0]), n_words / max(n_sentences, 1),
            float(lengths.std()), float((lengths >= LONG_WORD).mean()),
            sum(w in ENGLISH_STOP_WORDS for w in bare) / n_words, len(set(bare)) / n_words,
            sum(w in FIRST_PERSON for w in bare) / n_words,
            sum(w[:1].isupper() for w in words) / n_words,
            sum(w.endswith("ing") for w in bare) / n_words,
            sum(w.endswith("ly") for w in bare) / n_words,
            text.count(",") / n_words, text.count("(") / n_words, text.count("-") / n_words]


def date_matrix(texts: Sequence[str], citations: bool = True
                ) -> tuple[sparse.csr_matrix, list[str]]:
    """[n, n_features] date features of all texts (label-free) and the feature names."""
    from sklearn.feature_extraction import DictVectorizer

    vec = DictVectorizer(sparse=True)
    X = vec.fit_transform([date_features(t, citations) for t in texts]).tocsr()
    return X, list(vec.get_feature_names_out())


def count_matrix(texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int],
                 lowercase: bool) -> sparse.csr_matrix:
    """[n, V] raw term counts of all texts; labels never enter."""
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(analyzer=analyzer, ngram_range=ngram_range, lowercase=lowercase,
                          dtype=np.float64)
    return vec.fit_transform(list(texts)).tocsr()


class FoldTfidf:
    """TF-IDF of precomputed counts, fitted on the training rows only.

    `fit(counts[train]) -> self` keeps the terms present in those rows (the `max_features`
    most frequent there when given) and their smoothed IDF; `transform(counts[rows])` gives
    sublinear-tf x IDF, l2-normalised over the kept terms, as `TfidfVectorizer(
    sublinear_tf=True)` fitted on the same training texts would.
    """

    def __init__(self, max_features: int | None = None, use_idf: bool = True,
                 sublinear_tf: bool = True, binary: bool = False) -> None:
        self.max_features = max_features
        self.use_idf = use_idf
        self.sublinear_tf = sublinear_tf
        self.binary = binary

    def fit(self, counts: sparse.csr_matrix) -> FoldTfidf:
        df = np.asarray((counts > 0).sum(axis=0)).ravel()
        keep = np.flatnonzero(df > 0)
        if self.max_features is not None and len(keep) > self.max_features:
            tf = np.asarray(counts.sum(axis=0)).ravel()[keep]
            keep = np.sort(keep[np.argsort(-tf, kind="stable")[: self.max_features]])
        self.columns_ = keep
        n = counts.shape[0]
        self.idf_ = np.log((1.0 + n) / (1.0 + df[keep])) + 1.0 if self.use_idf else None
        return self

    def transform(self, counts: sparse.csr_matrix) -> sparse.csr_matrix:
        X = counts[:, self.columns_].tocsr().astype(np.float64)
        if self.binary:
            X.data[:] = 1.0
        elif self.sublinear_tf:
            X.data = 1.0 + np.log(X.data)
        if self.idf_ is not None:
            X = X @ sparse.diags(self.idf_)
        from sklearn.preprocessing import normalize

        return normalize(X.tocsr(), norm="l2", copy=False)
