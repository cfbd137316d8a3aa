"""The sandbox end to end on a tiny setting, its split, and its bad inputs."""

import json

import pytest
from conftest import gutenberg_paragraphs

from pddkit.cli import main
from pddkit.data.gutenberg import strip_gutenberg
from pddkit.errors import PddkitError
from pddkit.sandbox.corpus import Corpus, Document, load_corpus, sections
from pddkit.sandbox.experiment import parse_sweep
from pddkit.sandbox.split import split_documents, windows

TINY = ["--members", "16", "--reference", "16", "--epochs", "2", "--layers", "1", "--width",
        "32", "--vocab-size", "300", "--context", "128", "--windows", "32,64", "--bootstrap",
        "50", "--section-words", "120"]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in gutenberg_paragraphs(140)))
    return path


def test_sandbox_end_to_end_with_a_sweep(corpus_file, tmp_path, capsys, monkeypatch):
    from pddkit.engine import run as engine_run

    late = []  # each window's blind baseline is started before training and taken over
    monkeypatch.setattr(engine_run, "start_blind", lambda *a: late.append(a))
    out = tmp_path / "sb"
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(out),
                 "--sweep", "repeats=1,3", *TINY])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert late == []
    assert "AUC by repeats, 64-word windows" in printed.out and "report:" in printed.out
    summary = json.loads((out / "summary.json").read_text())
    truth = summary["ground_truth"]
    assert printed.out.lstrip().startswith(truth["line"])  # the first thing the CLI prints
    # 16 documents a side of 120+ words: two 32-word and one 64-word window each
    assert truth["line"] == (
        "ground truth verified (32 and 64-word windows): 0 of 48 non-member windows share a "
        "13-word run with training text; 48 of 48 member windows are verbatim training text; "
        "0 of 96 evaluated windows "
        "share a 13-word run with the reference pool or tokenizer texts (in each of the 2 runs)")
    assert [r["run"] for r in truth["runs"]] == ["repeats=1", "repeats=3"]
    nd = summary["corpus"]["near_duplicates"]
    assert nd["ngram"] == 13 and nd["examined"] == 48 + nd["dropped"]
    assert "G" + truth["line"][1:] in (out / "report.html").read_text()
    for run, repeats in (("repeats=1", 1), ("repeats=3", 3)):
        train = [json.loads(x) for x in (out / run / "train-documents.jsonl").read_text().splitlines()]
        assert len(train) == 16 and {(r["role"], r["repeats"]) for r in train} == {("member", repeats)}
        wins = [json.loads(x) for x in (out / run / "window-64" / "windows.jsonl").read_text().splitlines()]
        assert len(wins) == 32 and all(w["text"] in {r["id"]: r["text"] for r in train}[w["group"]]
                                       for w in wins if w["label"] == 1)
    tok_texts = (out / "tokenizer-texts.jsonl").read_text().splitlines()
    assert len(tok_texts) == 16  # the reference pool only: no member or non-member
    assert [r["name"] for r in summary["runs"]] == ["repeats=1", "repeats=3"]
    for run in summary["runs"]:
        for w in ("32", "64"):
            wdir = out / run["name"] / f"window-{w}"
            res = json.loads((wdir / "results.json").read_text())
            assert {"loss", "mink", "surp", "ref", "dcpdd", "blind"} <= set(res["methods"])
            assert (wdir / "report.html").is_file() and (wdir / "scores.jsonl").is_file()
        assert (out / run["name"] / "target-model" / "config.json").is_file()
    assert (out / "report.html").is_file() and (out / "sweep_64.png").is_file()
    # the saved target model is an ordinary HF directory: `pddkit run` works on it
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in ("one text", "another text")))
    code = main(["run", "--model", str(out / "repeats=3" / "target-model"), "--data", str(data),
                 "--output", str(tmp_path / "x"), "--methods", "loss,mink"])
    assert code == 0, capsys.readouterr().err
    assert len((tmp_path / "x" / "scores.jsonl").read_text().splitlines()) == 2
    # the split on disk: every document in exactly one role
    split = json.loads((out / "split.json").read_text())
    assert split["counts"]["member"] == 16 and split["counts"]["nonmember"] == 16
    # rebuilding the reports from the folder
    assert main(["report", str(out)]) == 0


def test_split_never_puts_a_document_on_both_sides():
    docs = tuple(Document(f"d{i}", " ".join(f"w{i}_{j}" for j in range(150)), "x")
                 for i in range(100))
    split = split_documents(Corpus("c", docs, 1, 0), 20, 20, 10, min_words=128, seed=3)
    roles = [set(d.id for d in part) for part in (split.members, split.nonmembers,
                                                   split.reference, split.background)]
    for i in range(4):
        for j in range(i + 1, 4):
            assert not roles[i] & roles[j]
    ds = windows(split, 64, per_doc=2, seed=3)
    member_ids = roles[0]
    for s in ds.samples:
        assert (s.group in member_ids) == (s.label == 1)
        assert all(w.startswith(f"w{s.group[1:]}_") for w in s.text.split())  # its own words
        assert len(s.text.split()) == 64
    assert len(ds.samples) == 2 * 20 * 2  # two non-overlapping windows per 150-word document
    again = split_documents(Corpus("c", docs, 1, 0), 20, 20, 10, min_words=128, seed=3)
    assert again == split  # seeded


def test_gutenberg_header_and_footer_are_stripped():
    from conftest import shared_path

    book = shared_path("corpora", "gutenberg", "Wilde, Oscar")
    text = next(book.glob("*.txt")).read_text(encoding="utf-8", errors="replace")
    body = strip_gutenberg(text)
    assert "Project Gutenberg" not in body[:2000] and "PROJECT GUTENBERG" not in body[-3000:]
    assert len(body) > 0.8 * len(text) - 25000


def test_sections_hold_about_the_asked_number_of_words():
    text = "\n\n".join(" ".join(["word"] * 30) for _ in range(40))  # 1200 words
    secs = sections(text, 200)  # 7 paragraphs (210 words) a section; 150 words left over
    assert [len(s.split()) for s in secs] == [210] * 5 + [150]
    tail = "\n\n".join(" ".join(["w"] * 30) for _ in range(8))  # 240: 210 + 30 (merged)
    assert [len(s.split()) for s in sections(tail, 200)] == [240]
    assert [len(s.split()) for s in sections(" ".join(["w"] * 1000), 200)] == [200] * 4 + [200]


def test_bad_corpora(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PddkitError, match=r"holds no \.txt files"):
        load_corpus(tmp_path / "empty")
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.txt").write_text("\n\n".join(" ".join(["alpha"] * 150) for _ in range(4)))
    (small / "b.txt").write_bytes("caf\xe9 ".encode("latin-1") * 300)
    corpus = load_corpus(small, section_words=150)
    assert corpus.undecodable_files == 1 and corpus.files == 2
    with pytest.raises(PddkitError, match=r"has 6 documents of at least 128 words .* needs 40"):
        split_documents(corpus, 15, 10, 0, min_words=128)
    bad = tmp_path / "c.jsonl"
    bad.write_text(json.dumps({"text": "fine " * 200}) + "\n" + "{broken\n")
    with pytest.raises(PddkitError, match=r"c\.jsonl line 2 is not a JSON object with a 'text'"):
        load_corpus(bad)
    with pytest.raises(PddkitError, match="unknown sweep knob 'speed'; sweepable: repeats"):
        parse_sweep("speed=1,2")
    with pytest.raises(PddkitError, match="must be ints"):
        parse_sweep("repeats=a,b")


def test_cli_bad_sandbox_inputs_are_one_sentence(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for args, sentence in [
        (["--corpus", str(tmp_path / "empty")], "holds no .txt files"),
        (["--corpus", str(tmp_path / "nowhere")], "does not exist"),
        (["--sweep", "speed=1,2"], "unknown sweep knob 'speed'"),
    ]:
        code = main(["sandbox", "--output", str(tmp_path / "o"), *args])
        err = capsys.readouterr().err
        assert code == 1 and sentence in err and "Traceback" not in err


def test_sandbox_runs_neighbor_and_probe(corpus_file, mask_model_dir, tmp_path, capsys):
    """The sandbox with a fill-mask model (`neighbor`) and its reference pool as the probe's
    auxiliary data. `neighbor` separates its members; `probe` is run and reported but not
    held above chance: on models this small no linear probe on the last-token activation
    separates members, not even one trained on the target's own labels
    (benchmarks/probe_ceiling.py; README, Methods)."""
    out = tmp_path / "sb"
    args = [a for a in TINY]
    for knob, value in (("--epochs", "20"), ("--layers", "2"), ("--width", "64"),
                        ("--context", "256"), ("--section-words", "60")):  # prompts fit
        args[args.index(knob) + 1] = value
    args[args.index("--windows") + 1] = "32"  # within the 128-token context
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(out), "--repeats", "3",
                 "--methods", "loss,neighbor:n_neighbors=6,probe", "--mask-model",
                 str(mask_model_dir), "--probe-lrs", "1e-3", *args])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    wdir = out / "run" / "window-32"
    res = json.loads((wdir / "results.json").read_text())
    aucs = {k: v["metrics"]["auc"] for k, v in res["methods"].items()}
    assert aucs["neighbor"] > 0.7, aucs
    probe = [json.loads(x)["probe"] for x in (wdir / "scores.jsonl").read_text().splitlines()]
    assert len(set(probe)) > len(probe) // 2  # log-odds: no ties from probabilities rounding to 1
    m = res["methods"]["probe"]["metrics"]
    labels = [json.loads(x)["label"] for x in (wdir / "scores.jsonl").read_text().splitlines()]
    pos = [p for p, y in zip(probe, labels) if y == 1]
    neg = [p for p, y in zip(probe, labels) if y == 0]
    mann_whitney = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(pos) * len(neg))
    assert (m["n_members"], m["n_nonmembers"]) == (len(pos), len(neg))
    assert len(pos) == res["counts"]["members"] >= 16 and len(neg) >= 16
    # the AUC of the scores written: pair counts over fewer than 100^2 pairs, in float64 both
    # ways (a few thousand roundings of 1.1e-16 at most); 1e-9 absolute is that with margin
    assert m["auc"] == pytest.approx(mann_whitney, abs=1e-9)
    assert m["auc_ci"][0] <= m["auc"] <= m["auc_ci"][1] and m["auc_ci"][0] < m["auc_ci"][1]
    assert res["counts"]["neighbor_texts"] == 6 * res["counts"]["samples"]
    assert (wdir / "neighbors.jsonl").is_file() and (wdir / "probe" / "probe.json").is_file()
    meta = json.loads((wdir / "probe" / "probe.json").read_text())
    assert meta["aux_texts"] == 16  # the reference pool
    warned = any(n.startswith("probe: the best probe") for n in res["notices"])
    assert warned == (meta["aux_val_auc"] < 0.6)  # a probe that separates nothing is flagged


@pytest.fixture(scope="module")
def llama_base(toy_world, tmp_path_factory):
    """A tiny random Llama-shaped model with the toy tokenizer: a `--base-model` of another
    family than the sandbox's own GPT-2."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(toy_world.target_dir)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=256, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    out = tmp_path_factory.mktemp("llama-base")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_sandbox_goes_on_from_a_base_model(corpus_file, llama_base, tmp_path, capsys):
    """--base-model: the target is the base model pre-trained further on the members (its
    own family and tokenizer), the reference model is the base model as it was."""
    import numpy as np
    from safetensors.numpy import load_file

    out = tmp_path / "sb"
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(out), "--base-model",
                 str(llama_base), "--lr", "3e-3", "--repeats", "3", "--epochs", "20",
                 "--members", "16", "--reference", "16", "--context", "128", "--windows", "32",
                 "--section-words", "120", "--methods", "loss,ref,mink", "--bootstrap", "50"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert not (out / "reference-model").exists()  # nothing trained from scratch
    target = out / "run" / "target-model"
    assert json.loads((target / "config.json").read_text())["model_type"] == "llama"
    before, after = load_file(llama_base / "model.safetensors"), load_file(target / "model.safetensors")
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    res = json.loads((out / "run" / "window-32" / "results.json").read_text())
    assert res["models"]["reference"]["name"] == str(llama_base)
    aucs = {k: v["metrics"]["auc"] for k, v in res["methods"].items()}
    assert aucs["loss"] > 0.7 and aucs["ref"] > 0.7, aucs
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["base_model"] == str(llama_base) and summary["config"]["lr"] == 3e-3
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(tmp_path / "x"),
                 "--base-model", str(llama_base), "--tokenizer", str(llama_base)])
    err = capsys.readouterr().err
    assert code == 1 and "--tokenizer and --base-model exclude each other" in err
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(tmp_path / "y"),
                 "--base-model", str(llama_base), "--layers", "4"])  # not silently ignored
    err = capsys.readouterr().err
    assert code == 1 and "with --base-model the base model's own shape is used" in err


@pytest.mark.slow
def test_a_failing_report_keeps_the_sandbox_scores(corpus_file, tmp_path, capsys, monkeypatch):
    """Each window's report is an optional stage: when it raises, the window's scores and
    results stay on disk, results.json says the report failed and why, and the sandbox ends
    with exit 0."""
    import pddkit.reporting.report as report

    def broken(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report, "write_report", broken)
    out = tmp_path / "sb"
    args = [a for a in TINY]
    args[args.index("--windows") + 1] = "32"
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(out), *args])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    wdir = out / "run" / "window-32"
    res = json.loads((wdir / "results.json").read_text())
    assert res["stages"]["report"] == {"status": "failed", "reason": "RuntimeError: disk full"}
    # a score for every window the sandbox evaluated (windows.jsonl), none lost
    rows = [json.loads(x) for x in (wdir / "scores.jsonl").read_text().splitlines()]
    wins = [json.loads(x) for x in (wdir / "windows.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [w["id"] for w in wins] and len(rows) > 0
    assert all(isinstance(r["loss"], float) for r in rows)
    assert not (wdir / "report.html").exists()
    assert "report failed (RuntimeError: disk full)" in printed.err


def test_a_misspelt_method_is_refused_before_training(corpus_file, tmp_path, capsys):
    """`--methods minkk` is one sentence before any model is trained (it came after both
    models were trained), and no output folder is left behind."""
    out = tmp_path / "sb"
    code = main(["sandbox", "--corpus", str(corpus_file), "--output", str(out), *TINY,
                 "--methods", "loss,minkk"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("pddkit: error: ") and "did you mean mink" in err
    assert not out.exists()


def _make_variable(name: str) -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "Makefile").read_text(encoding="utf-8")
    [value] = [line.split(":=", 1)[1].strip() for line in text.splitlines()
               if line.startswith(f"{name} :=")]
    return value


def test_make_demo_names_every_method_of_all_that_runs_offline_and_demo_all_the_rest():
    """`make demo` lists its methods (not `all`, to leave `probe` out): a method added to
    `all` must be added there too, or to the two it leaves out on purpose; `make demo-all`
    runs what `make demo` runs and more, and neither holds texts out for calibration, so
    the two tables are over the same windows."""
    from pddkit.engine.plan import needs_of
    from pddkit.methods.base import METHODS, Need
    from pddkit.params import parse_spec, split_spec_list

    demo = [parse_spec(s)[0] for s in split_spec_list(_make_variable("DEMO_METHODS"))]
    demo_all = [parse_spec(s)[0] for s in split_spec_list(_make_variable("DEMO_ALL_METHODS"))]
    in_all = {spec.name for spec in METHODS if not spec.named_only}
    assert in_all - set(demo) == {"probe", "neighbor"}  # at chance here; needs a fill-mask model
    assert {"recall", "conrecall", "pac"} <= set(demo)
    assert demo_all[0] == "all" and set(demo) - in_all <= set(demo_all)
    # samia at chance on the sandbox, infill detects but takes longer than the rest together
    for slow in ("samia", "infill"):
        assert slow in demo_all and slow not in demo
    for methods in (_make_variable("DEMO_METHODS"), _make_variable("DEMO_ALL_METHODS")):
        assert Need.CALIBRATION not in needs_of(methods)
