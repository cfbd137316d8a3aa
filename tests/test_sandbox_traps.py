"""`pddkit sandbox --traps`: copyright traps (Meeus et al. 2024) generated with the
sandbox's reference model, inserted into carrier documents, and detected; the carriers, the
filter of traps sharing text with the corpus, the ground-truth check from the files, and a
small sandbox run end to end."""

import json

import pytest
from conftest import gutenberg_paragraphs

from pddkit.cli import main
from pddkit.errors import PddkitError
from pddkit.sandbox import ground_truth, traps
from pddkit.sandbox.corpus import Corpus, Document
from pddkit.sandbox.experiment import SandboxConfig
from pddkit.sandbox.split import CARRIER, split_documents, windows
from pddkit.studies.traps.folder import HELD_OUT, MEMBER, Trap, TrapFolder, read_folder
from pddkit.studies.traps.inject import sentence_boundaries


def _sentences(tag: str, words: int, per_sentence: int = 10) -> str:
    """`words` distinct words, a full stop after every `per_sentence`."""
    out = [f"{tag}{j}" + ("." if (j + 1) % per_sentence == 0 else "") for j in range(words)]
    return " ".join(out)


def _corpus(n: int = 120, words: int = 150) -> Corpus:
    return Corpus("c", tuple(Document(f"d{i}", _sentences(f"w{i}_", words), "x")
                             for i in range(n)), 1, 0)


def _trap(k: int, role: str, length: int = 25) -> Trap:
    text = " ".join(f"trap{k}x{j}" for j in range(16)) + "."
    return Trap(id=f"L{length}-{k:05d}", text=text, token_ids=tuple(range(length)),
                length=length, perplexity=10.0 + k, bucket=0, temperature=0.5, role=role)


def _write(out, traps_=None, repeats=(1, 3), carriers=12):
    """The sandbox's files for one run with traps, as experiment.py writes them."""
    split = split_documents(_corpus(), 15, 15, 5, min_words=64, seed=0, carriers=carriers,
                            carrier_boundaries=max(repeats))
    tok_rows = [{"id": d.id, "text": d.text} for d in split.reference + split.background]
    ground_truth.write_split_texts(out, split, tok_rows)
    generated = TrapFolder(tuple(traps_ or [_trap(k, (MEMBER, HELD_OUT)[k % 2]) for k in range(16)]),
                           {"model": "m", "tokenizer": {}})
    strap = traps.place(generated, split, out, repeats=repeats, seed=0)
    run = out / "run"
    strap.write(run)
    texts = ground_truth.write_train_documents(run, split, 1, 5, carriers=strap.rows)
    ground_truth.write_windows(run / "window-64", windows(split, 64, seed=0))
    return run, split, strap, texts


def test_carriers_are_spare_documents_joined_to_hold_the_highest_repeat_count():
    corpus = _corpus()
    plain = split_documents(corpus, 15, 15, 5, min_words=64, seed=1)
    split = split_documents(corpus, 15, 15, 5, min_words=64, seed=1, carriers=10,
                            carrier_boundaries=32)
    # the four roles (so tokenizer and reference model) are the same with carriers or without
    assert (split.members, split.nonmembers, split.reference, split.background) == (
        plain.members, plain.nonmembers, plain.reference, plain.background)
    assert len(split.carriers) == 10 and not plain.carriers
    used = {d.id for d in split.members + split.nonmembers + split.reference + split.background}
    by_id = {d.id: d for d in corpus.documents}
    for c, parts in zip(split.carriers, split.carrier_parts):
        assert len(sentence_boundaries(c.text)) >= 32  # 15 a document: three documents each
        assert len(parts) == 3 and not set(parts) & used
        assert c.text == "\n\n".join(by_id[i].text for i in parts)
    ids = [i for parts in split.carrier_parts for i in parts]
    assert len(ids) == len(set(ids)) == 30
    roles = split.roles()
    assert {roles[i] for i in ids} == {CARRIER}
    assert split.near_duplicates.carrier_examined == 30 and split.near_duplicates.carrier_dropped == 0
    # a spare document sharing a 13-word run with a member is never a carrier part
    member = split.members[0]
    copy = Document("copy", member.text.split(".")[2] + ". " + _sentences("z", 140), "x")
    bigger = Corpus("c", (*corpus.documents, copy), 1, 0)
    again = split_documents(bigger, 15, 15, 5, min_words=64, seed=1, carriers=23,
                            carrier_boundaries=32)
    assert "copy" not in {i for parts in again.carrier_parts for i in parts}
    with pytest.raises(PddkitError, match=r"leaves 70 documents .*enough for 23 of the 40 trap "
                                          r"carriers of at least 32 sentence boundaries each "
                                          r".*lower `traps` or `trap_repeats`"):
        split_documents(corpus, 15, 15, 5, min_words=64, seed=1, carriers=40, carrier_boundaries=32)


def test_traps_sharing_text_with_the_corpus_or_another_trap_are_dropped():
    corpus = [_sentences("a", 100), _sentences("b", 100)]
    ok = [_trap(k, MEMBER) for k in range(3)]
    quoted = Trap(**{**ok[0].__dict__, "id": "q", "text": "\n".join(corpus[0].upper().split()[20:33])})
    short = Trap(**{**ok[0].__dict__, "id": "s", "text": corpus[1][30:60]})  # verbatim, < 13 words
    inside = Trap(**{**ok[0].__dict__, "id": "i", "text": ok[1].text[10:60]})
    sibling = Trap(**{**ok[0].__dict__, "id": "r",
                      "text": "new " + " ".join(ok[2].text.split()[:13]) + " words"})
    kept, dropped = traps.filter_traps([*ok, quoted, short, inside, sibling], corpus)
    assert [t.id for t in kept] == [t.id for t in ok]
    assert dropped == {"q": "shares a 13-word run with a document of the split",
                       "s": "verbatim in a document of the split",
                       "i": "occurs inside another trap",
                       "r": "shares a 13-word run with another trap"}


def test_each_inserted_trap_is_in_its_carrier_exactly_r_times_and_the_line_says_so(tmp_path):
    run, _, strap, texts = _write(tmp_path)
    folder = read_folder(run / traps.FOLDER)
    assert len(folder.insertions) == 8 and {i.repeats for i in folder.insertions} == {1, 3}
    by_id = {t.id: t for t in folder.traps}
    for ins in folder.insertions:  # what the trainer gets: R copies, all in the carrier
        assert sum(t.count(by_id[ins.trap_id].text) for t in texts) == ins.repeats
    held = [t for t in folder.traps if t.role == HELD_OUT]
    assert len(held) == 8 and not any(t.text in x for t in held for x in texts)
    rows = ground_truth.read_jsonl(run / ground_truth.TRAIN)
    carriers = [r for r in rows if r["role"] == CARRIER]
    assert len(carriers) == 8 and {r["repeats"] for r in carriers} == {1}
    assert all(r["id"].startswith("carrier:") for r in carriers)  # never a member document
    assert strap.counts["carriers"] == 12 and strap.counts["carriers_with_trap"] == 8
    assert not any("trap" in r["text"] for r in ground_truth.read_jsonl(tmp_path / "tokenizer-texts.jsonl"))
    check = ground_truth.verify_run(tmp_path, run).traps
    assert (check.inserted, check.inserted_counted, check.held_out, check.evaluated) == (8, 8, 8, 16)
    line = ground_truth.verify_sandbox(tmp_path, [run], None, None)["line"]
    assert line.endswith("; traps: 8 inserted, each exactly R times (1, 3) in "
                         "train-documents.jsonl; 0 of 8 held-out traps occur in any training, "
                         "reference or tokenizer text")
    # a run whose traps were evaluated records its epochs: each copy is seen once an epoch,
    # so with 3 epochs the counts 1 and 3 are seen 3 and 9 times
    (run / traps.FOLDER / "results.json").write_text(json.dumps({"epochs": 3}))
    line = ground_truth.verify_sandbox(tmp_path, [run], None, None)["line"]
    assert line.endswith("; traps: 8 inserted, each exactly R times (1, 3) in "
                         "train-documents.jsonl, trained 3 epochs: seen R x 3 times (3, 9); 0 of "
                         "8 held-out traps occur in any training, reference or tokenizer text")


@pytest.mark.parametrize("tamper", ["count off", "copy in another document", "held-out trained on",
                                    "held-out quoted", "reference pool quotes a trap",
                                    "role flipped"])
def test_the_check_fails_on_tampered_trap_files(tmp_path, tamper):
    run, *_ = _write(tmp_path)
    train = ground_truth.read_jsonl(run / ground_truth.TRAIN)
    folder = read_folder(run / traps.FOLDER)
    held = next(t for t in folder.traps if t.role == HELD_OUT)
    inserted = {i.trap_id for i in folder.insertions}
    member = next(t for t in folder.traps if t.id in inserted)
    expect = "1 of 8 held-out traps occur in, or share a 13-word run with, training text"
    if tamper == "count off":
        next(r for r in train if r["role"] == CARRIER)["repeats"] = 2
        expect = ("1 of 8 inserted traps do not occur in the training documents exactly as often "
                  "as inserted")
    elif tamper == "copy in another document":
        next(r for r in train if r["role"] == "background")["text"] += " " + member.text
        expect = "1 of 8 inserted traps do not occur"
    elif tamper == "held-out trained on":
        train.append({"id": "extra", "role": "background", "repeats": 1, "text": held.text})
    elif tamper == "held-out quoted":  # 13 of its words inside a member document
        next(r for r in train if r["role"] == "member")["text"] += " " + " ".join(
            held.text.split()[:13])
    elif tamper == "reference pool quotes a trap":
        ref = ground_truth.read_jsonl(tmp_path / ground_truth.REFERENCE)
        ref[0]["text"] += " " + held.text
        ground_truth.write_jsonl(tmp_path / ground_truth.REFERENCE, ref)
        expect = ("1 of 16 traps occur in, or share a 13-word run with, the reference pool or "
                  "tokenizer texts")
    else:  # a held-out trap marked as to be inserted in the run's folder
        rows = ground_truth.read_jsonl(run / traps.FOLDER / "traps.jsonl")
        next(r for r in rows if r["id"] == member.id)["role"] = HELD_OUT
        ground_truth.write_jsonl(run / traps.FOLDER / "traps.jsonl", rows)
        expect = "1 of 8 inserted traps do not occur"
    ground_truth.write_jsonl(run / ground_truth.TRAIN, train)
    with pytest.raises(PddkitError, match=f"ground truth check failed for .*traps: .*{expect}"):
        ground_truth.verify_run(tmp_path, run)


def test_too_many_traps_sharing_text_with_the_corpus_is_one_sentence(tmp_path):
    split = split_documents(_corpus(), 15, 15, 5, min_words=64, seed=0, carriers=4,
                            carrier_boundaries=3)
    quoting = [Trap(**{**_trap(k, MEMBER).__dict__, "text": split.members[k].text[:200]})
               for k in range(4)]
    generated = TrapFolder((*quoting, _trap(8, HELD_OUT)), {"model": "m", "tokenizer": {}})
    with pytest.raises(PddkitError, match=r"4 of the 5 traps share text with the corpus, leaving "
                                          r"0 to insert and 1 held out: more `traps`"):
        traps.place(generated, split, tmp_path, repeats=(1, 3))
    assert json.loads((tmp_path / traps.FOLDER / traps.FILTER).read_text())["dropped"] == 4


@pytest.mark.parametrize(("change", "message"), [
    ({"traps": 15}, "`traps` 15 is not a multiple of `trap_buckets` 10"),
    ({"traps": 4, "trap_buckets": 1}, "`traps` 4 gives 2 traps of each length to insert, fewer "
                                      "than the 3 `trap_repeats`"),
    ({"trap_repeats": (1, 1)}, "`trap_repeats` must be distinct whole numbers"),
    ({"trap_lengths": ()}, "`trap_lengths` must be distinct token counts"),
    ({"trap_ppl_range": (50.0, 5.0)}, "`trap_ppl_range` must be two perplexities"),
    ({"trap_ppl_range": (1.0, 5.0, 9.0)}, "`trap_ppl_range` must be two perplexities"),
    ({"trap_lengths": (600,)}, "`trap_lengths` 600 does not fit the models' `context` of 512"),
    ({"methods": "probe,recall"}, "`methods` 'probe,recall' names no method traps can be scored by"),
])
def test_bad_trap_options_are_one_sentence(change, message):
    with pytest.raises(PddkitError, match=message.replace("(", r"\(")):
        traps.check_options(SandboxConfig(**{"traps": 20, **change}))
    traps.check_options(SandboxConfig(traps=0, **{k: v for k, v in change.items() if k != "traps"}))


def test_traps_are_scored_by_the_methods_that_need_no_mask_model_probe_or_shots():
    assert traps.methods_for_traps("all") == "all"
    assert traps.methods_for_traps("loss,probe,ref,recall,neighbor,mink:k=0.1") == "loss,ref,mink:k=0.1"
    cfg = SandboxConfig(traps=40, trap_buckets=10)
    assert traps.carriers_needed(cfg) == 2 * 10 * 2  # half of each cell of 4, two lengths
    assert traps.carriers_needed(SandboxConfig(traps=30)) == 2 * 10 * 2  # 3 a cell: 2 at most
    assert traps.carriers_needed(SandboxConfig()) == 0


def test_cli_refuses_bad_trap_options_before_training(tmp_path, capsys):
    for args, sentence in [
        (["--traps", "15"], "--traps 15 is not a multiple of --trap-buckets 10"),
        (["--traps", "20", "--trap-repeats", "1,x"], "--trap-repeats '1,x' must be whole numbers"),
        (["--traps", "20", "--trap-ppl-range", "5"], "--trap-ppl-range must be two perplexities"),
    ]:
        code = main(["sandbox", "--output", str(tmp_path / "o"), *args])
        err = capsys.readouterr().err
        assert code == 1 and sentence in err and "Traceback" not in err, err
        assert not (tmp_path / "o" / "split.json").exists()


# vocabulary 500, not test_sandbox.py's 300: under a reference model this small, nearly every
# sample from a 300-token BPE fails to re-encode to its own ids (about 1 in 50 passes; 1 in 5
# with 500), and trap generation would run out of samples
TINY = ["--members", "16", "--reference", "16", "--epochs", "2", "--layers", "1", "--width",
        "32", "--vocab-size", "500", "--context", "128", "--windows", "32", "--bootstrap", "50",
        "--section-words", "120", "--methods", "loss,ref"]


@pytest.fixture
def one_thread():
    """Tiny models on 2 shared cores: more threads are many times slower (test_contamination)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_a_sandbox_with_traps_detects_traps_repeated_32_times_better_than_once(
        tmp_path, capsys, one_thread):
    """20 traps of 25 tokens inserted (10 once, 10 32 times per epoch, 2 epochs) and 20 held
    out. `ref` AUC, R=1 vs R=32, on seeds 0 / 1 / 2 / 3 (checked by hand; the test runs
    seed 0): 0.480 vs 0.865, 0.325 vs 0.915, 0.525 vs 0.905, 0.635 vs 0.845."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in gutenberg_paragraphs(300)))
    out = tmp_path / "sb"
    code = main(["sandbox", "--corpus", str(corpus), "--output", str(out), *TINY, "--traps", "40",
                 "--trap-lengths", "25", "--trap-repeats", "1,32", "--trap-buckets", "1",
                 "--trap-ppl-range", "1,1000"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    summary = json.loads((out / "summary.json").read_text())
    line = summary["ground_truth"]["line"]
    c = summary["traps"]
    # 2 epochs (TINY): a trap inserted 1 or 32 times is seen 2 or 64 times
    assert line.endswith(f"; traps: {c['inserted']} inserted, each exactly R times (1, 32) in "
                         f"train-documents.jsonl, trained 2 epochs: seen R x 2 times (2, 64); 0 "
                         f"of {c['held_out']} held-out traps occur in any training, reference "
                         "or tokenizer text")
    assert c["generated"] == 40 and c["inserted"] >= 16 and c["held_out"] >= 16
    entry = summary["runs"][0]["traps"]
    auc = {cell["repeats"]: cell["auc"]["ref"] for cell in entry["cells"]}
    assert auc[32] > auc[1] and auc[32] >= 0.75, auc
    assert entry["epochs"] == 2
    assert {cell["repeats"]: cell["exposures"] for cell in entry["cells"]} == {1: 2, 32: 64}
    assert "Traps: AUC by length x repeats" in printed.out
    assert "L=25, R=32 = 64 exposures" in printed.out and "L=25, R=1 = 2 exposures" in printed.out
    detected = json.loads((out / entry["dir"] / "results.json").read_text())
    assert detected["epochs"] == 2 and detected["exposures"] == [2, 64]
    rows = [json.loads(x) for x in (out / entry["dir"] / "scores.jsonl").read_text().splitlines()]
    assert {(r["repeats"], r["exposures"]) for r in rows} == {(0, 0), (1, 2), (32, 64)}
    for name in ("traps.jsonl", "manifest.json", "trap-info.jsonl", "injection.json",
                 "results.json", "scores.jsonl", "report.html"):
        assert (out / entry["dir"] / name).is_file(), name
    assert (out / traps.FOLDER / traps.FILTER).is_file()
    assert "run, traps" in (out / "report.html").read_text()
