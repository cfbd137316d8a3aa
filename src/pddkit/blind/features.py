"""Features of the blind baseline (blind/baseline.py), each computable per cross-validation
fold from the training part alone.

- `date_features`: the years and dates a text mentions (Das et al. 2024's date detection):
  every year 1000-2099 and its decade, the largest and smallest year, step indicators
  "largest year >= T" / "smallest year >= T" (so a linear model can learn a cut-off),
  how many years, and whether a month appears with a year or a full date is written out;
  and the newest year the text cites (`citation_years`: LaTeX citation keys such as
  `\\cite{vaswani2017attention}`, author-year citations, reference-list entries), as
  Das et al. do for arXiv papers, with step indicators like the years' and a missing
  indicator (`no_cite_year`) for the texts that cite nothing.
- `style_features`: length, typography and stylometry.
Term counts and their TF-IDF per fold are in blind/counts.py (`count_matrix`,
`FoldTfidf`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from pddkit.blind.counts import count_matrix  # noqa: F401  (re-exported)

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
# Every year, date, citation key and reference-list entry has a digit or a backslash.
MAYBE_DATE_RE = re.compile(r"[\d\\]")
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
    if not MAYBE_DATE_RE.search(text):  # no digit, no backslash: no year, date or citation
        return {"no_year": 1.0, "no_cite_year": 1.0} if citations else {"no_year": 1.0}
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
    words = text.split()
    n_chars, n_words = max(len(text), 1), max(len(words), 1)
    lines = text.split("\n")
    n_sentences = len(SENTENCE_END_RE.findall(text))
    lens = list(map(len, words))
    lengths = np.array(lens) if words else np.zeros(1)
    # lower-casing makes and removes no whitespace or stripped punctuation
    bare = [w for w in (w.strip(STRIPPED) for w in text.lower().split()) if w]
    joined = " ".join(bare) + " "  # a bare word ends in "ing" once per "ing " here
    upper, digit, punct, non_ascii = _char_counts(text)
    return [math.log1p(len(text)), math.log1p(len(words)),
            sum(lens) / n_words, float(len(lines[0].split())),
            len(lines) / n_words, n_sentences / n_words,
            upper / n_chars, digit / n_chars, punct / n_chars,
            text.count("$") / n_chars, non_ascii / n_chars,
            math.log1p(len(lines[0])), float(":" in lines[0]), n_words / max(n_sentences, 1),
            float(lengths.std()), float((lengths >= LONG_WORD).mean()),
            sum(map(_stop_words().__contains__, bare)) / n_words, len(set(bare)) / n_words,
            sum(map(FIRST_PERSON.__contains__, bare)) / n_words,
            sum(map(str.isupper, [w[0] for w in words])) / n_words,
            joined.count("ing ") / n_words, joined.count("ly ") / n_words,
            text.count(",") / n_words, text.count("(") / n_words, text.count("-") / n_words]


SENTENCE_END_RE = re.compile(r"[.!?](?:\s|$)")
STRIPPED = ".,;:!?()[]{}\"'"  # stripped from a word's ends before it counts as a word type
# the ASCII characters str.isspace, str.isupper, str.isdigit and str.isalnum accept
_ASCII_SPACE = bytes([9, 10, 11, 12, 13, 28, 29, 30, 31, 32])
_ASCII_UPPER = bytes(range(65, 91))
_ASCII_DIGIT = bytes(range(48, 58))
_ASCII_ALNUM = _ASCII_UPPER + _ASCII_DIGIT + bytes(range(97, 123))


def _stop_words() -> frozenset:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return ENGLISH_STOP_WORDS


def _char_counts(text: str) -> tuple[int, int, int, int]:
    """(upper-case, digit, punctuation (neither alphanumeric nor space), non-ASCII)
    characters, as str.isupper / isdigit / isalnum / isspace count them; ASCII text by
    deleting byte classes, which is many times quicker than a loop over characters."""
    if text.isascii():
        b = text.encode("ascii")
        n = len(b)
        alnum = n - len(b.translate(None, _ASCII_ALNUM))
        space = n - len(b.translate(None, _ASCII_SPACE))
        return (n - len(b.translate(None, _ASCII_UPPER)), n - len(b.translate(None, _ASCII_DIGIT)),
                n - alnum - space, 0)
    alnum, space = sum(map(str.isalnum, text)), sum(map(str.isspace, text))
    return (sum(map(str.isupper, text)), sum(map(str.isdigit, text)), len(text) - alnum - space,
            len(text) - len(text.encode("ascii", "ignore")))


def date_matrix(texts: Sequence[str], citations: bool = True
                ) -> tuple[sparse.csr_matrix, list[str]]:
    """[n, n_features] date features of all texts (label-free) and the feature names."""
    from sklearn.feature_extraction import DictVectorizer

    vec = DictVectorizer(sparse=True)
    X = vec.fit_transform([date_features(t, citations) for t in texts]).tocsr()
    return X, list(vec.get_feature_names_out())
