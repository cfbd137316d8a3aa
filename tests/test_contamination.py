"""`pddkit sandbox --contaminate`: benchmark examples inserted into the training documents
(Shi et al. 2024, section 6), their clean split, the copies drawn, the ground-truth check
from the files, and a sweep of contamination-repeats end to end."""

import json
import math
import random

import numpy as np
import pytest
from conftest import gutenberg_paragraphs, shared_path

from pddkit.cli import main
from pddkit.data.gutenberg import strip_gutenberg
from pddkit.errors import PddkitError
from pddkit.sandbox import contamination as cont
from pddkit.sandbox import ground_truth
from pddkit.sandbox.contamination import Example
from pddkit.sandbox.corpus import Corpus, Document, paragraphs
from pddkit.sandbox.split import split_documents, windows

TINY = ["--members", "16", "--reference", "16", "--layers", "1", "--width", "64",
        "--vocab-size", "300", "--context", "128", "--windows", "32", "--bootstrap", "50",
        "--section-words", "120", "--methods", "loss,mink,zlib"]


def qa_examples(n: int, seed: int = 0, max_words: int = 90) -> list[str]:
    """`n` formatted question + answer examples made from Poe's and Wilde's paragraphs
    (the sandbox corpus below is Doyle's and Austen's)."""
    root = shared_path("corpora", "gutenberg")
    paras: list[str] = []
    for author in ("Poe, Edgar Allan", "Wilde, Oscar"):
        for f in sorted((root / author).glob("*.txt"))[:3]:
            text = strip_gutenberg(f.read_text(encoding="utf-8", errors="replace"))
            paras += [p for p in paragraphs(text, 30) if len(p.split()) <= max_words]
    paras = sorted(set(paras))
    random.Random(seed).shuffle(paras)
    assert len(paras) >= n, len(paras)
    out = []
    for p in paras[:n]:
        words = p.split()
        out.append(f"Question: how does the passage beginning \"{' '.join(words[:8])}\" go on?\n"
                   f"Answer: {' '.join(words[8:])}")
    return out


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in gutenberg_paragraphs(140)))
    return path


@pytest.fixture(scope="module")
def examples_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "text": t}) + "\n"
                            for i, t in enumerate(qa_examples(40, max_words=50))))
    return path


def _words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{j}" for j in range(n))


def test_examples_are_split_clean_half_and_half():
    corpus = [_words("c", 100), _words("d", 100)]
    ex = [Example(f"e{i}", f"Q: {_words(f'x{i}_', 20)}\nA: yes", "f") for i in range(40)]
    ex += [Example("dup", ex[0].text.upper().replace(" ", "  "), "f"),  # same text, folded
           Example("empty", "  \n ", "f"),
           Example("inside", ex[1].text[3:40], "f"),  # verbatim inside another example
           Example("corpus", "Q: " + " ".join(corpus[0].split()[5:18]) + " ?", "f"),  # 13-word run
           Example("quote", corpus[1][10:40], "f"),  # a short verbatim quote
           Example("sib", "Q2: " + " ".join(ex[2].text.split()[1:15]) + " no", "f")]  # shares with e2
    split = cont.split_examples(ex, corpus, fraction=0.5, seed=3, file="f")
    c = split.counts()
    assert (c["duplicates"], c["empty"], c["inside_another"], c["shared_with_corpus"]) == (1, 1, 1, 2)
    assert c["contaminants"] + c["heldout"] + c["shared_both_sides"] == 41
    assert abs(c["contaminants"] - c["heldout"]) <= 1
    side = {e.id: "c" for e in split.contaminants} | {e.id: "h" for e in split.heldout}
    assert "sib" not in side or side["sib"] == side["e2"]  # a shared 13-word run: one side
    again = cont.split_examples(ex, corpus, fraction=0.5, seed=3, file="f")
    assert again == split  # seeded
    assert cont.split_examples(ex, corpus, fraction=0.5, seed=4, file="f") != split
    quarter = cont.split_examples(ex, corpus, fraction=0.25, seed=3, file="f")
    assert 9 <= len(quarter.contaminants) <= 10  # round(0.25 x 41)
    with pytest.raises(PddkitError, match=r"`contamination_fraction` must lie between 0 and 1"):
        cont.split_examples(ex, corpus, fraction=1.0)
    with pytest.raises(PddkitError, match=r"leaves 1 contaminants and 1 held-out examples .*at "
                                          r"least 2 of each are needed"):
        cont.split_examples(ex[:2], corpus, file="f")


def test_copies_are_poisson_or_exact():
    assert cont.draw_occurrences(5, 4, poisson=False) == (4,) * 5
    for mean in (1, 2, 8):
        draws = cont.draw_occurrences(20000, mean, seed=1)
        # sampling error, not rounding: the mean of 20,000 Poisson draws has standard error
        # sqrt(mean / 20000) (0.007 at mean 1, 0.02 at 8), so 0.05 x mean is 7 to 20 of them;
        # the share of zeros sqrt(p (1 - p) / 20000) <= 0.0035, so 0.01 is 2.8 of them (the
        # draws are seeded: the same numbers on every machine)
        assert abs(sum(draws) / len(draws) - mean) < 0.05 * mean  # the mean asked for
        zero = sum(k == 0 for k in draws) / len(draws)  # never inserted: evaluated as held out
        assert abs(zero - math.exp(-mean)) < 0.01
        assert len(set(draws)) > 3  # not constant
    assert cont.draw_occurrences(50, 2, seed=1) == cont.draw_occurrences(50, 2, seed=1)
    assert cont.draw_occurrences(50, 2, seed=1) != cont.draw_occurrences(50, 2, seed=2)
    with pytest.raises(PddkitError, match=r"`contamination_repeats` must be at least 1, not 0"):
        cont.draw_occurrences(3, 0)


def _corpus() -> Corpus:
    return Corpus("c", tuple(Document(f"d{i}", _words(f"w{i}_", 150), "x") for i in range(60)), 1, 0)


def _write(tmp_path, poisson=True, repeats=3):
    """The sandbox's files for one run with contaminants, as experiment.py writes them."""
    split = split_documents(_corpus(), 15, 15, 5, min_words=64, seed=0)
    ex = [Example(f"example:{i}", f"Question {i}: {_words(f'q{i}_', 25)}\nAnswer: yes", "f")
          for i in range(30)]
    csplit = cont.split_examples(ex, [d.text for d in split.members + split.nonmembers
                                      + split.reference + split.background], seed=0, file="f")
    tok_rows = [{"id": d.id, "text": d.text} for d in split.reference + split.background]
    ground_truth.write_split_texts(tmp_path, split, tok_rows)
    ground_truth.write_jsonl(tmp_path / cont.EXAMPLES, cont.example_rows(csplit))
    run = tmp_path / "run"
    occ = cont.draw_occurrences(len(csplit.contaminants), repeats, poisson=poisson, seed=0)
    data = cont.dataset(csplit, occ)
    ground_truth.write_jsonl(run / cont.FOLDER / cont.EVALUATED, cont.evaluated_rows(data, occ))
    texts = ground_truth.write_train_documents(run, split, 1, 5, cont.training_rows(csplit, occ))
    ground_truth.write_windows(run / "window-64", windows(split, 64, seed=0))
    return run, csplit, occ, texts


@pytest.mark.parametrize(("poisson", "repeats"), [(True, 1), (True, 3), (False, 3)])
def test_each_contaminant_is_in_the_training_stream_as_often_as_drawn(tmp_path, poisson, repeats):
    run, csplit, occ, texts = _write(tmp_path, poisson, repeats)
    zeros = sum(k == 0 for k in occ)
    assert (zeros > 0) == (repeats == 1) and (poisson or set(occ) == {3})  # R=1: e^-1 are 0
    for e, k in zip(csplit.contaminants, occ):  # what the trainer gets: k whole copies each
        assert sum(t.count(e.text) for t in texts) == k
    assert all(not any(e.text in t for t in texts) for e in csplit.heldout)
    rows = ground_truth.read_jsonl(run / cont.FOLDER / cont.EVALUATED)
    for r, k in zip(rows, occ):  # a contaminant drawn 0 times is evaluated as never seen
        assert (r["role"], r["occurrences"], r["label"]) == ("contaminant", k, int(k > 0))
    check = ground_truth.verify_run(tmp_path, run).contamination
    assert (check.contaminants, check.contaminants_counted) == (15 - zeros, 15 - zeros)
    assert (check.heldout, check.heldout_in_training, check.insertions) == (15 + zeros, 0, sum(occ))
    assert check.drawn_zero == zeros
    line = ground_truth.verify_sandbox(tmp_path, [run], None, None)["line"]
    zero_note = f" ({zeros} of them contaminants drawn 0 times)" if zeros else ""
    assert line.endswith(f"; contamination: {15 - zeros} of {15 - zeros} contaminants occur verbatim "
                         f"in the training documents exactly as often as drawn ({sum(occ)} copies "
                         f"per epoch); 0 of {15 + zeros} held-out examples{zero_note} occur in or "
                         "share a 13-word run with training text")


@pytest.mark.parametrize("tamper", ["held-out trained on", "held-out quoted", "count off",
                                    "contaminant also in a background document", "wrong role",
                                    "reference pool quotes an example", "drawn 0 times yet member"])
def test_the_check_fails_on_tampered_contamination_files(tmp_path, tamper):
    run, csplit, occ, _ = _write(tmp_path, repeats=1)
    inserted, zeros = sum(k > 0 for k in occ), sum(k == 0 for k in occ)
    train = ground_truth.read_jsonl(run / ground_truth.TRAIN)
    held = csplit.heldout[0]
    first = next(e for e, k in zip(csplit.contaminants, occ) if k > 0)
    expect = (f"1 of {15 + zeros} held-out examples occur in, or share a 13-word run with, "
              "training text")
    if tamper == "held-out trained on":
        train.append({"id": held.id, "role": "contaminant", "repeats": 1, "text": held.text})
    elif tamper == "held-out quoted":  # 13 words of it inside a background document
        next(r for r in train if r["role"] == "background")["text"] += " " + " ".join(
            held.text.split()[3:16])
    elif tamper == "count off":
        next(r for r in train if r["id"] == first.id)["repeats"] += 1
        expect = (f"1 of {inserted} contaminants do not occur in the training documents as "
                  "often as drawn")
    elif tamper == "contaminant also in a background document":
        next(r for r in train if r["role"] == "background")["text"] += "\n" + first.text
        expect = (f"1 of {inserted} contaminants do not occur in the training documents as "
                  "often as drawn")
    elif tamper == "drawn 0 times yet member":  # labelled a member, though never inserted
        path = run / cont.FOLDER / cont.EVALUATED
        rows = ground_truth.read_jsonl(path)
        next(r for r in rows if r["role"] == "contaminant" and r["occurrences"] == 0)["label"] = 1
        ground_truth.write_jsonl(path, rows)
        expect = "1 of 30 evaluated examples are not examples of the file with their role, or carry"
    elif tamper == "wrong role":
        rows = ground_truth.read_jsonl(tmp_path / cont.EXAMPLES)
        next(r for r in rows if r["id"] == held.id)["role"] = "contaminant"
        ground_truth.write_jsonl(tmp_path / cont.EXAMPLES, rows)
        expect = "1 of 30 evaluated examples are not examples of the file with their role, or carry"
    else:
        ref = ground_truth.read_jsonl(tmp_path / ground_truth.REFERENCE)
        ref[0]["text"] += " " + held.text
        ground_truth.write_jsonl(tmp_path / ground_truth.REFERENCE, ref)
        expect = "1 of 30 examples occur in, or share a 13-word run with, the reference pool"
    ground_truth.write_jsonl(run / ground_truth.TRAIN, train)
    with pytest.raises(PddkitError, match=f"ground truth check failed for .*contamination: .*{expect}"):
        ground_truth.verify_run(tmp_path, run)


def test_bad_contamination_inputs_are_one_sentence(corpus_file, examples_file, tmp_path, capsys):
    for args, sentence in [
        (["--sweep", "contamination-repeats=1,2"],
         "a --sweep of contamination-repeats needs --contaminate"),
        (["--contaminate", str(examples_file), "--contamination-repeats", "0"],
         "--contamination-repeats must be at least 1, not 0"),
        (["--contaminate", str(tmp_path / "none.jsonl")], "--contaminate file"),
        (["--contaminate", str(examples_file), "--contamination-fraction", "1.5"],
         "--contamination-fraction must lie between 0 and 1"),
    ]:
        code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(tmp_path / "o"),
                     "--overwrite", "--epochs", "1", "--ref-epochs", "1", *TINY, *args])
        err = capsys.readouterr().err
        assert code == 1 and sentence in err and "Traceback" not in err, err


@pytest.mark.slow
def test_a_contamination_sweep_end_to_end(corpus_file, examples_file, tmp_path, capsys):
    """`pddkit sandbox --contaminate ... --sweep contamination-repeats=1,8`: the files, the
    ground-truth line, the tables and reports of one sandbox."""
    args = list(TINY)
    for knob, value in (("--members", "12"), ("--reference", "12"), ("--section-words", "60")):
        args[args.index(knob) + 1] = value
    out = tmp_path / "sb"
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(out), "--contaminate",
                 str(examples_file), "--sweep", "contamination-repeats=1,8", "--contamination-exact",
                 "--epochs", "2", "--ref-epochs", "1", "--lr", "3e-3", *args])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    _check_sweep_files(out, json.loads((out / "summary.json").read_text()), printed.out)


TREND_SEEDS = (0, 1, 2)


@pytest.mark.slow
def test_mink_detects_contaminants_seen_8_times_better_than_once_on_every_seed():
    """The main trend of Shi et al.'s Figure 5c with the sandbox's own pieces (clean split
    of examples, exact copies, the trainer), a tiny model and no reports: on each of three
    seeds (split of examples, initial weights, training order) `mink`'s AUC of inserted
    contaminants vs held-out examples is higher with 8 copies than with 1. Fails when
    copies do not reach the training stream, or more copies do not help detection."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models on 2 shared cores: more threads are many times slower
    try:
        aucs = _mink_auc_by_copies()
    finally:
        torch.set_num_threads(threads)
    pairs = [(round(aucs[s, 1], 3), round(aucs[s, 8], 3)) for s in TREND_SEEDS]
    print(f"\nmink AUC (1 copy, 8 copies) on seeds {TREND_SEEDS}: {pairs}")
    assert all(aucs[s, 8] > aucs[s, 1] for s in TREND_SEEDS), pairs
    assert np.mean([aucs[s, 8] - aucs[s, 1] for s in TREND_SEEDS]) >= 0.1, pairs


def _mink_auc_by_copies() -> dict:
    from sklearn.metrics import roc_auc_score

    import pddkit
    from pddkit.sandbox import training

    background = gutenberg_paragraphs(40)  # Doyle's and Austen's; the examples are Poe's, Wilde's
    examples = [Example(f"q{i}", t, "bench") for i, t in enumerate(qa_examples(40, max_words=50))]
    tok = training.train_bpe_tokenizer(background, vocab_size=300)
    aucs = {}
    for seed in TREND_SEEDS:
        split = cont.split_examples(examples, background, seed=seed, file="bench")
        for copies in (1, 8):
            occ = cont.draw_occurrences(len(split.contaminants), copies, poisson=False)
            data = cont.dataset(split, occ)
            texts = background + [r["text"] for r in cont.training_rows(split, occ)
                                  for _ in range(r["repeats"])]
            model = training.build_gpt2(tok, n_layer=1, n_embd=64, n_head=2, n_positions=128,
                                        seed=seed)
            training.train_causal_lm(model, tok, texts, epochs=2, lr=3e-3, batch_size=4,
                                     seed=seed, context=128)
            scores = pddkit.score([s.text for s in data.samples], model, "mink", tokenizer=tok,
                                  device="cpu")["mink"]
            aucs[seed, copies] = roc_auc_score([s.label for s in data.samples], scores)
    return aucs


def _check_sweep_files(out, summary, printed):
    assert "AUC by contamination-repeats, contaminants vs held-out examples" in printed
    truth = summary["ground_truth"]
    assert truth["line"].endswith(
        " (in each of the 2 runs); contamination: 20 of 20 contaminants occur verbatim in the "
        "training documents exactly as often as drawn; 0 of 20 held-out examples occur in or "
        "share a 13-word run with training text (copies per epoch: 20 in "
        "contamination-repeats=1, 160 in contamination-repeats=8)")
    c = summary["contamination"]
    assert (c["examples"], c["contaminants"], c["heldout"], c["poisson"]) == (40, 20, 20, False)
    rows = ground_truth.read_jsonl(out / cont.EXAMPLES)
    assert sum(r["role"] == "contaminant" for r in rows) == 20
    for run, k in zip(summary["runs"], (1, 8)):
        entry = run["contamination"]
        res = json.loads((out / entry["dir"] / "results.json").read_text())
        assert res["counts"]["members"] == 20 and res["counts"]["nonmembers"] == 20
        assert {"loss", "mink", "zlib", "blind"} <= set(entry["auc"])
        assert (out / entry["dir"] / "report.html").is_file()
        assert entry["occurrences"] == {"1" if k == 1 else "5-8": 20}
        train = ground_truth.read_jsonl(out / run["dir"] / ground_truth.TRAIN)
        assert sorted(r["repeats"] for r in train if r["role"] == "contaminant") == [k] * 20
        assert (out / run["dir"] / "window-32" / "results.json").is_file()  # windows as before
    assert (out / "sweep_contamination.png").is_file() and (out / "sweep_32.png").is_file()
    assert "contamination-repeats=8, contamination" in (out / "report.html").read_text()
    assert main(["report", str(out)]) == 0


def _summary(seed: int, aucs: dict, lr: float = 1e-3) -> dict:
    """A sandbox summary.json's content, as far as pddkit.sandbox.seeds reads it."""
    return {"config": {"seed": seed, "lr": lr, "members": 30},
            "sweep": {"knob": "contamination-repeats", "values": [int(v) for v in aucs]},
            "runs": [{"name": f"contamination-repeats={v}", "contamination": {"auc": a},
                      "windows": {}} for v, a in aucs.items()]}


def test_seeds_are_aggregated_per_sweep_value_and_method():
    from pddkit.sandbox.seeds import aggregate

    runs = [_summary(0, {"1": {"mink": 0.6, "loss": 0.55}, "8": {"mink": 0.9, "loss": 0.5}}),
            _summary(1, {"1": {"mink": 0.7, "loss": 0.60}, "8": {"mink": 0.8, "loss": 0.7}}),
            _summary(2, {"1": {"mink": 0.5, "loss": 0.65}, "8": {"mink": 0.7, "loss": 0.6}})]
    agg = aggregate(runs)
    assert (agg.knob, agg.values, agg.methods, agg.seeds) == (
        "contamination-repeats", ("1", "8"), ("mink", "loss"), (0, 1, 2))
    s = agg.auc["8"]["mink"]
    assert s.values == (0.9, 0.8, 0.7)
    # a mean and a standard deviation of three float64 numbers: a few roundings of 1e-16
    assert (s.mean, s.sd, s.low, s.high) == pytest.approx((0.8, 0.1, 0.7, 0.9), rel=1e-12)
    # mink: 0.6->0.9, 0.7->0.8, 0.5->0.7 (every seed up); loss: down, up, down
    assert agg.change("mink", "1", "8") == "rises" and agg.change("mink", "8", "1") == "falls"
    assert agg.change("loss", "1", "8") == "mixed"
    assert not agg.ranges_apart("mink", "1", "8")  # 0.5-0.7 touches 0.7-0.9
    saved = agg.to_json()["auc"]["1"]["loss"]
    # a mean of three float64 numbers: a few roundings of 1e-16
    assert saved["per_seed"] == [0.55, 0.6, 0.65] and saved["mean"] == pytest.approx(0.6, rel=1e-12)
    assert aggregate(runs[:1]).auc["1"]["mink"].sd == 0.0


@pytest.mark.parametrize(("tamper", "message"), [
    ("same seed", r"the summaries' seeds repeat \(0, 0\)"),
    ("other lr", r"the sandbox of seed 1 differs from that of seed 0 in more than the seed \(lr\)"),
    ("method missing", r"the sandbox of seed 1 has no AUC for loss at 8"),
])
def test_seeds_that_cannot_be_aggregated_are_one_sentence(tamper, message):
    from pddkit.sandbox.seeds import aggregate

    first = _summary(0, {"1": {"mink": 0.6, "loss": 0.5}, "8": {"mink": 0.9, "loss": 0.5}})
    other = _summary(0 if tamper == "same seed" else 1,
                     {"1": {"mink": 0.6, "loss": 0.5},
                      "8": {"mink": 0.9} if tamper == "method missing" else {"mink": 0.9, "loss": 0.5}},
                     lr=2e-3 if tamper == "other lr" else 1e-3)
    with pytest.raises(PddkitError, match=message):
        aggregate([first, other])


def test_too_few_inserted_or_never_inserted_is_one_sentence():
    ex = [Example(f"example:{i}", f"Question {i}: {_words(f'q{i}_', 25)}", "f") for i in range(6)]
    split = cont.ContaminationSplit(tuple(ex[:3]), tuple(ex[3:]), "f", 6, 0, 0, 0, 0, 0)
    with pytest.raises(PddkitError, match="1 of 3 contaminants were drawn at least once"):
        cont.dataset(split, (0, 0, 2))
    data = cont.dataset(split, (0, 1, 2))  # the one drawn 0 times joins the never-inserted
    assert [s.label for s in data.samples] == [0, 1, 1, 0, 0, 0]
    assert "drawn 0 times" in data.samples[0].source


def test_auc_by_occurrences_leaves_contaminants_drawn_zero_times_with_the_held_out():
    from types import SimpleNamespace

    from pddkit.sandbox.experiment import _by_occurrences

    ids = ["c0", "c1", "c2", "c3", "h0", "h1"]
    drawn = {"c0": 0, "c1": 1, "c2": 1, "c3": 2}
    labels = [0, 1, 1, 1, 0, 0]  # c0 was never inserted
    scores = {"mink": [0.1, 0.9, 0.8, 0.7, 0.2, 0.3]}
    result = SimpleNamespace(ids=ids, labels=labels, scores=lambda: scores)
    out = _by_occurrences(result, drawn)
    assert out["occurrences"] == {"1": 2, "2": 1} and out["drawn_zero_times"] == 1
    assert out["mean_occurrences"] == 1.0
    assert out["auc_by_occurrences"]["1"]["mink"] == 1.0  # c1, c2 against c0, h0, h1
