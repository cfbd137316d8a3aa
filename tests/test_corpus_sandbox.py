"""A sandbox's training documents, indexed, confirm its ground truth from the index alone,
in the index's terms: every member window is found whole (each of its 13-token n-grams, and
the window itself), and no non-member window has 20% of its 13-token n-grams in the
training documents (the sandbox's own check is on 13-word runs, longer than 13 tokens)."""

import json

import pytest
from conftest import gutenberg_paragraphs

from pddkit.cli import main

pytest.importorskip("infini_gram")

TINY = ["--members", "16", "--reference", "16", "--epochs", "1", "--layers", "1", "--width",
        "32", "--vocab-size", "300", "--context", "128", "--windows", "32", "--bootstrap",
        "50", "--section-words", "120", "--methods", "loss"]


@pytest.mark.slow
def test_an_indexed_sandbox_confirms_its_ground_truth(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in gutenberg_paragraphs(140)))
    sb = tmp_path / "sb"
    assert main(["sandbox", "--corpus", str(corpus), "--output", str(sb), *TINY]) == 0
    truth = json.loads((sb / "summary.json").read_text())["ground_truth"]["line"]
    run = sb / "run"
    assert main(["corpus", "index", "--corpus", str(run / "train-documents.jsonl"),
                 "--tokenizer", str(run / "target-model"), "--output", str(tmp_path / "ix")]) == 0
    out = tmp_path / "check"
    capsys.readouterr()
    assert main(["corpus", "check", "--index", str(tmp_path / "ix"), "--data",
                 str(run / "window-32" / "windows.jsonl"), "--output", str(out),
                 "--whole-training-set"]) == 0
    assert "none contradicted" in capsys.readouterr().out
    rows = [json.loads(x) for x in (out / "overlap.jsonl").read_text().splitlines()]
    members = [r for r in rows if r["label"] == 1]
    nonmembers = [r for r in rows if r["label"] == 0]
    # the sandbox's line, e.g. "... 0 of 22 non-member windows share a 13-word run with
    # training text; 27 of 27 member windows are verbatim training text ..."
    assert f"0 of {len(nonmembers)} non-member windows share" in truth
    assert f"{len(members)} of {len(members)} member windows are verbatim" in truth
    # the same from the index alone
    assert all(r["overlap"] == 1.0 and r["count"] >= 1 for r in members)
    assert all(r["overlap"] < 0.2 for r in nonmembers)
