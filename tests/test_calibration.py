"""Calibration data (SPEC 3e): a `calibration` table (labelled, both classes, refused when a
text shares a 13-word run with a text under test) or a seeded stratified 30% held out of
the labelled data, documents kept whole, the texts under test sharing a run with it left
out and counted; the need declared per call (acmia with `beta` given needs none). A run
through the whole engine: tests/test_acmia.py."""

from __future__ import annotations

import pytest
from cli_helpers import write_jsonl

from pddkit.data.calibration import from_table, held_out
from pddkit.data.samples import Dataset, Sample
from pddkit.data.tables import load_table
from pddkit.engine.plan import Resources, make_plan
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "heath", "iris",
         "jade", "kelp", "lichen", "moss", "nettle", "onyx", "pumice", "quartz", "reed", "slate",
         "tundra", "umber", "violet", "willow", "xenon", "yarrow", "zinc"]


def text(i: int, n: int = 20) -> str:
    """A text of n words sharing no 13-word run with text(j), j != i (its own word order)."""
    return " ".join(f"{WORDS[(i * 7 + k * (i % 5 + 1)) % len(WORDS)]}{i}" for k in range(n))


def data(n: int = 20, groups=None) -> Dataset:
    return Dataset("d.jsonl", tuple(
        Sample(str(i), text(i), i % 2, f"d.jsonl line {i + 1}",
               None if groups is None else groups[i]) for i in range(n)))


def test_held_out_is_a_seeded_stratified_30_percent_never_evaluated():
    d = data(40)
    rest, cal = held_out(d, seed=3)
    assert cal.counts() == {"texts": 12, "members": 6, "nonmembers": 6, "source": "held out 30%",
                            "left_out": {"sharing_a_13_word_run_with_a_calibration_text": 0}}
    ids = {s.id for s in cal.samples}
    assert len(rest.samples) == 28 and not ids & {s.id for s in rest.samples}
    assert {s.id for s in held_out(d, seed=3)[1].samples} == ids  # the seed decides
    assert {s.id for s in held_out(d, seed=4)[1].samples} != ids
    assert [r["id"] for r in cal.rows()] == [s.id for s in cal.samples]
    assert set(cal.rows()[0]) == {"id", "label", "source", "text"}


def test_held_out_keeps_documents_whole_and_leaves_out_texts_sharing_a_run():
    groups = [f"doc{i // 2}" for i in range(40)]  # two texts per document, one of each label
    rest, cal = held_out(data(40, groups), seed=0)
    cal_docs = {s.group for s in cal.samples}
    assert not cal_docs & {s.group for s in rest.samples}

    d = data(30)
    copies = tuple(Sample(f"c{i}", " ".join(s.text.split()[:15]) + " tail words", s.label,
                          f"d.jsonl line {31 + i}") for i, s in enumerate(d.samples))
    both = Dataset("d.jsonl", d.samples + copies)
    rest, cal = held_out(both, seed=1)
    twins = {s.id.lstrip("c") for s in cal.samples}  # each calibration text's twin leaves
    assert not twins & {s.id.lstrip("c") for s in rest.samples}
    left = cal.counts()["left_out"]["sharing_a_13_word_run_with_a_calibration_text"]
    assert left == len(both.samples) - len(cal.samples) - len(rest.samples) > 0


def test_held_out_needs_labels_and_a_text_of_each_class_to_evaluate():
    unlabelled = Dataset("u.jsonl", tuple(Sample(str(i), text(i)) for i in range(10)))
    with pytest.raises(PddkitError, match=r"^calibration data must be labelled: pass "
                                          r"`calibration`"):
        held_out(unlabelled, 0)
    two = data(2)  # one text per class: 30% of one text leaves no member on one side
    with pytest.raises(PddkitError, match=r"^holding out calibration data \(30%\) leaves no"):
        held_out(two, 0)


def test_a_calibration_file_sharing_a_13_word_run_with_a_text_under_test_is_refused(tmp_path):
    d = data(10)
    clean = write_jsonl(tmp_path / "cal.jsonl", [{"text": text(100 + i), "label": i % 2}
                                                 for i in range(6)])
    cal = from_table(load_table(clean), str(clean), d)
    assert cal.counts() == {"texts": 6, "members": 3, "nonmembers": 3, "source": str(clean)}

    words = text(4).split()
    leak = write_jsonl(tmp_path / "leak.jsonl", [
        {"text": text(100), "label": 1}, {"text": text(101), "label": 0},
        {"text": "other words first " + " ".join(words[2:15]) + " and more", "label": 0}])
    with pytest.raises(PddkitError) as e:
        from_table(load_table(leak), str(leak), d)
    msg = str(e.value)
    assert msg == (f"`calibration` {leak}: the text at {leak} line 3 shares a 13-word run with "
                   "d.jsonl line 5 under test, whose label would leak into the choice of its "
                   "score; remove it")
    same = write_jsonl(tmp_path / "same.jsonl", [{"text": text(100), "label": 1},
                                                 {"text": "  " + text(7) + "\n", "label": 0}])
    with pytest.raises(PddkitError, match=r"line 2 is d.jsonl line 8 under test"):
        from_table(load_table(same), str(same), d)


def test_a_calibration_file_needs_labels_of_both_classes(tmp_path):
    d = data(10)
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"text": text(100 + i)} for i in range(4)])
    with pytest.raises(PddkitError, match=r"^`calibration` \S+ has no labels"):
        from_table(load_table(bare), str(bare), d)
    ones = write_jsonl(tmp_path / "ones.jsonl", [{"text": text(100 + i), "label": 1}
                                                 for i in range(4)])
    with pytest.raises(PddkitError, match=r"^`calibration` \S+ holds only members"):
        from_table(load_table(ones), str(ones), d)


def test_the_need_is_per_call_and_acmia_is_named_only():
    with_data = Resources(calibration=True)
    assert Need.CALIBRATION in make_plan("acmia", with_data).needs
    assert Need.CALIBRATION not in make_plan("acmia:beta=0.5", Resources()).needs
    assert "acmia" not in [c.label for c in make_plan("all", with_data).calls]
    with pytest.raises(PddkitError) as e:
        make_plan("acmia", Resources())
    assert str(e.value) == ("method acmia needs labelled calibration data: pass `calibration` "
                            "(a labelled table; or labelled data to hold 30% out of), or give "
                            "beta (acmia:beta=0.5)")
