"""`ngram`'s coverage and ci (SPEC 3e; methods/ngram_coverage.py) against hand-worked
examples and against a transcription, written here, of the authors' loop
(NGramCoverageAttack@ee53d11 compute_ngram_coverage.py:138-157 Hypothesis, 187-245
find_exact_match, 264-269 the short-generation case; compute_creativity_index.py:59-146
get_ngram_coverage and compute_modified_creativity_index, gen-length normalisation, all spans).

Coverage values are ratios of small integers, computed the same way on both sides: the
comparisons are exact (==), or pytest.approx with 1e-12 where a sum of up to eleven such
ratios is added in another order (eleven additions of values <= 1: a few ulp of 12)."""

from __future__ import annotations

import random

import pytest
from nltk.tokenize.casual import casual_tokenize
from sacremoses import MosesDetokenizer
from unidecode import unidecode

from pddkit.methods.ngram_coverage import coverage_of

MD = MosesDetokenizer(lang="en")


# --- the authors' loop, transcribed (plain functions, no Dataset: one source document) ----

def authors_spans(generation: str, snippet_no_prompt: str, min_ngram: int = 3):
    """(tokens, spans as [start, end)) as compute_ngram_coverage.process_single_doc and
    find_exact_match leave them."""
    tokens = casual_tokenize(unidecode(generation))
    source = unidecode(snippet_no_prompt)
    if len(tokens) < min_ngram:  # 266-267: too_short, no spans, coverage 0
        return tokens, []
    spans = []
    first, second = 0, min_ngram
    while second <= len(tokens):
        text = MD.detokenize(tokens[first:second])
        if text in source:  # source_data.filter(lambda x: span_text in x['text']) has a hit
            if spans and first <= spans[-1][0] and spans[-1][1] <= second:
                spans = [*spans[:-1], (first, second)]  # replace_span
            else:
                spans.append((first, second))  # add_span
            second += 1
        elif second - first > min_ngram:
            first += 1
        elif second - first == min_ngram:
            first += 1
            second += 1
        else:
            raise ValueError
    return tokens, spans


def authors_coverage(generation: str, reference: str) -> float:
    """Hypothesis.get_score with finished = True: flags over every token."""
    tokens, spans = authors_spans(generation, reference)
    if not spans:
        return 0
    flags = [False] * len(tokens)
    for s, e in spans:
        flags[s:e] = [True] * (e - s)
    return len([f for f in flags if f]) / len(flags)


def authors_ci(generation: str, reference: str, low: int = 2, high: int = 12) -> float:
    """compute_modified_creativity_index's creativities_gen_length (unique_coverages=False)."""
    tokens, spans = authors_spans(generation, reference)
    total = 0
    for n in range(low, high + 1):
        flags = [False for _ in tokens]
        for s, e in spans:
            if e - s >= n:
                flags[s:e] = [True] * (e - s)
        hit = len([f for f in flags if f])
        total += 0 if hit == 0 else hit / len(flags)
    return total


# --- hand-worked ----------------------------------------------------------------------

def test_one_run_extended_then_broken():
    # g = the cat sat on a mat today ok (8 words): [0,3) and [0,4) match, [0,5) "... on a"
    # does not; no later 3-word window occurs in R: one record [0,4), 4 of 8 words
    cov = coverage_of("the cat sat on a mat today ok", "the cat sat on the mat today")
    assert cov.length == 8 and cov.records == ((0, 4),)
    assert cov.share() == 4 / 8
    assert cov.index() == 3 * (4 / 8)  # n = 2, 3, 4 count the 4-word record; n >= 5 nothing


def test_two_records_and_a_replaced_one():
    # g = one two three zero two three four five: [0,3) matches, then no window until
    # [4,7) "two three four", extended to [4,8) (replacing it): 3 + 4 of 8 words
    cov = coverage_of("one two three zero two three four five", "one two three four five six")
    assert cov.records == ((0, 3), (4, 8))
    assert cov.share() == 7 / 8
    assert cov.index() == pytest.approx(2 * (7 / 8) + 4 / 8, abs=1e-12)  # n=2,3: both; n=4: one


def test_overlapping_records_count_their_union_once():
    # R breaks "delta. beta": [0,4) matches, [0,5) not; then [1,5) and [1,6) match and the
    # second replaces the first; records [0,4) and [1,6) overlap in 3 words: union 6 of 6
    cov = coverage_of("alpha beta gamma delta epsilon zeta",
                      "alpha beta gamma delta. beta gamma delta epsilon zeta")
    assert cov.records == ((0, 4), (1, 6))
    assert cov.share() == 1.0
    # n = 2, 3, 4: both records, 6/6; n = 5: [1,6) alone, 5/6; n >= 6: none
    assert cov.index() == pytest.approx(3 + 5 / 6, abs=1e-12)


def test_windows_are_detokenized_with_moses_not_joined_with_spaces():
    # casual tokens Hello , world ! It's fine . : Moses glues the punctuation back, so
    # every window is found in R; joined with spaces ("Hello , world") none would be
    cov = coverage_of("Hello, world! It's fine.", "He said Hello, world! It's fine.")
    assert cov.length == 7 and cov.records == ((0, 7),) and cov.share() == 1.0
    assert " ".join(casual_tokenize("Hello, world!")[:3]) not in "He said Hello, world!"


def test_unidecode_on_both_sides_case_sensitive_and_short_generations():
    assert coverage_of("Le cafe est ouvert", "Le café est ouvert").share() == 1.0
    assert coverage_of("Le café est ouvert", "Le cafe est ouvert").share() == 1.0
    assert coverage_of("the cat sat", "The Cat Sat").share() == 0.0  # case-sensitive
    short = coverage_of("two words", "two words and more")  # |g| < 3: 0 by definition
    assert short.length == 2 and short.records == () and short.share() == 0.0
    assert coverage_of("", "anything").share() == 0.0


def test_characters_not_words_a_window_may_match_inside_a_longer_word():
    # a substring test on characters: "he cat sat" occurs inside "the cat sat"
    assert coverage_of("he cat sat", "the cat sat").share() == 1.0


# --- against the transcription ----------------------------------------------------------

VOCAB = ["the", "cat", "sat", "on", "mat", "a", "dog", ",", ".", "it's", "\u201cso\u201d", "cafe",
         "caf\u00e9", "!", "(", ")", "was", "The"]


def _random_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


@pytest.mark.slow  # 400 pairs: about a second and a half
def test_coverage_and_ci_equal_the_authors_loop_on_many_made_up_pairs():
    rng = random.Random(7)
    checked = nonzero = 0
    for _ in range(400):
        reference = _random_text(rng, rng.randint(5, 60))
        # a generation that partly copies the reference, partly not
        words = reference.split()
        cut = rng.randint(0, len(words))
        generation = " ".join(words[cut:cut + rng.randint(0, 15)]) + " " + _random_text(
            rng, rng.randint(0, 12)) + " " + " ".join(words[:rng.randint(0, 8)])
        cov = coverage_of(generation, reference)
        assert cov.share() == authors_coverage(generation, reference), (generation, reference)
        assert cov.index() == pytest.approx(authors_ci(generation, reference), abs=1e-12)
        checked += 1
        nonzero += cov.share() > 0
    assert checked == 400 and 100 < nonzero < 400  # both kinds of pair were met


def test_a_real_paragraph_against_the_transcription():
    from pathlib import Path

    book = Path("/work/shared/corpora/gutenberg/Austen, Jane/Emma.txt")
    if not book.is_file():
        pytest.skip("shared/ corpora not here")
    text = book.read_text(encoding="utf-8", errors="replace")
    at = text.index("Emma Woodhouse, handsome, clever, and rich")
    reference = text[at:at + 1500]
    # a generation that copies two stretches of the reference with an invented part between
    generation = reference[40:400] + " and then she went out, to walk in the garden. " + reference[700:900]
    cov = coverage_of(generation, reference)
    assert cov.share() == authors_coverage(generation, reference)
    assert cov.index() == pytest.approx(authors_ci(generation, reference), abs=1e-12)
    assert 0.5 < cov.share() < 1.0
