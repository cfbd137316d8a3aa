"""`pddkit run --index` (issue 31, item 3): each text's overlap with the training corpus in
scores.jsonl, the labels checked, and the metrics with the contradicted texts left out,
against a corpus written here with planted non-members, counted in plain Python."""

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_helpers import run_cli, write_jsonl
from conftest import gutenberg_paragraphs
from corpus_world import PlainCounts, auc_by_ranks, build_corpus_index, save_index_tokenizer
from tiny_models import save_tiny_gpt2

N = 13
COLUMNS = ("tokens", "ngrams", "ngrams_found", "overlap", "longest_match", "count")
# AUCs from pddkit's ROC and from pair counting are both ratios of integer counts (below
# 2**53) reached in a handful of float operations: they agree to a few units of 1e-16
AUC_TOL = 1e-12


@dataclass(frozen=True)
class World:
    index: Path
    tokenizer_dir: Path
    model: Path
    data: Path
    rows: list  # the data's rows
    planted: set  # ids of the non-members the corpus contains
    documents: list  # the corpus's documents
    plain: PlainCounts


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    root = tmp_path_factory.mktemp("run-index")
    paras = gutenberg_paragraphs(70, seed=3)
    members, nonmembers, others, pool = paras[:20], paras[20:40], paras[40:50], paras[50:]
    tok_dir = root / "index-tokenizer"
    tok = save_index_tokenizer(tok_dir, pool)
    half = nonmembers[4].split()
    documents = (members[:19]  # members[19] is not in the corpus: found by --whole-training-set
                 + nonmembers[:3]  # planted whole, each a document
                 + [f"{others[0]} {nonmembers[3]} {others[1]}",  # planted inside a document
                    " ".join(half[:len(half) // 2]),  # its first half: about 50% of its n-grams
                    " ".join(nonmembers[5].split()[:9])]  # 9 words: below 20% of its n-grams
                 + others[2:])
    index = build_corpus_index(root / "index", documents, tok, tok_dir)
    rows = [{"id": f"m{i}", "text": t, "label": 1} for i, t in enumerate(members)]
    rows += [{"id": f"n{i}", "text": t, "label": 0} for i, t in enumerate(nonmembers)]
    rows.append({"id": "short", "text": "Too short.", "label": 0})  # fewer tokens than one 13-gram
    data = write_jsonl(root / "data.jsonl", rows)
    model = save_tiny_gpt2(root / "model")
    return World(index, tok_dir, model, data, rows, {"n0", "n1", "n2", "n3", "n4"}, documents,
                 PlainCounts(documents, tok))


def _scores(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]


def _expected_auc(rows: list[dict], method: str, keep) -> float:
    kept = [r for r in rows if keep(r)]
    return auc_by_ranks([r[method] for r in kept], [r["label"] for r in kept])


@pytest.mark.slow
def test_overlap_columns_contradictions_and_metrics_without_them(world, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "run", "--model", world.model, "--data", world.data,
                                "--methods", "loss,zlib", "--index", world.index, "--output", out,
                                "--bootstrap", "20", "--no-blind", "--device", "cpu")
    assert code == 0, err
    rows = _scores(out)
    assert [r["id"] for r in rows] == [r["id"] for r in world.rows]
    texts = {r["id"]: r["text"] for r in world.rows}
    for r in rows:  # every column equal to the count made over the same token ids here
        assert {k: r[k] for k in COLUMNS} == world.plain.row(texts[r["id"]], N), r["id"]
    # the planted non-members, and only they, are contradicted
    expected = {r["id"] for r in rows if r["label"] == 0 and r["ngrams"]
                and r["ngrams_found"] / r["ngrams"] >= 0.2}
    assert expected == world.planted
    assert {r["id"]: r["contradicted"] for r in rows if r["contradicted"]} == \
        dict.fromkeys(world.planted, "non-member found")
    # the plants are what they were meant to be: whole copies, a half, a near miss
    by_id = {r["id"]: r for r in rows}
    assert all(by_id[i]["overlap"] == 1.0 for i in ("n0", "n1", "n2", "n3"))
    assert 0.2 <= by_id["n4"]["overlap"] < 1.0 and 0 < by_id["n5"]["overlap"] < 0.2
    assert by_id["n0"]["count"] == 1 and by_id["n3"]["count"] == 1  # inside a document too
    assert by_id["short"]["ngrams"] == 0 and by_id["short"]["overlap"] is None
    assert by_id["short"]["contradicted"] is None

    assert (f"labels checked against the corpus (index {world.index}, tokenizer "
            f"{world.tokenizer_dir}): 5 contradicted (5 non-members with at least 20% of "
            f"13-grams found) of 40 checked; 1 text shorter than 13 tokens has no 13-gram and "
            "was not checked") in stdout
    assert "Metrics on all texts and with the labels the corpus contradicts left out:" in stdout
    assert "AUC, contradicted left out" in stdout

    results = json.loads((out / "results.json").read_text())
    check = results["corpus_check"]
    assert check["counts"] == {"texts": 41, "checked": 40, "too_short": 1, "too_short_members": 0,
                               "too_short_nonmembers": 1, "contradicted": 5,
                               "nonmembers_found": 5, "members_not_found": 0,
                               "left_out_of_metrics": 5}
    assert (check["tokenizer"], check["n"], check["max_overlap"], check["normalize"]) == \
        (str(world.tokenizer_dir), 13, 0.2, True)
    for method in ("loss", "zlib"):
        m = results["methods"][method]
        assert abs(m["metrics"]["auc"] - _expected_auc(rows, method, lambda r: True)) < AUC_TOL
        without = m["metrics_without_contradicted"]
        assert abs(without["auc"] - _expected_auc(rows, method, lambda r: not r["contradicted"])
                   ) < AUC_TOL
        assert (without["n_members"], without["n_nonmembers"]) == (20, 16)
    report = (out / "report.html").read_text()
    assert "labels checked against the corpus (index" in report and "Contradicted labels" in report
    assert "Metrics on all texts and with the labels the corpus contradicts left out" in report
    assert all(f"<td>{i}</td>" in report for i in world.planted)


@pytest.mark.slow
def test_whole_training_set_and_a_validation_split(world, tmp_path, capsys):
    """Members with no n-gram in the corpus are contradicted too; the metrics without the
    contradicted texts are on the test part."""
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "run", "--model", world.model, "--data", world.data,
                                "--methods", "loss", "--index", world.index, "--output", out,
                                "--whole-training-set", "--val-fraction", "0.5",
                                "--bootstrap", "0", "--no-blind", "--no-report",
                                "--device", "cpu")
    assert code == 0, err
    rows = _scores(out)
    lost = {r["id"] for r in rows if r["label"] == 1 and r["ngrams"] and not r["ngrams_found"]}
    assert "m19" in lost  # the member left out of the corpus
    assert {r["id"]: r["contradicted"] for r in rows if r["contradicted"]} == {
        **dict.fromkeys(world.planted, "non-member found"),
        **dict.fromkeys(lost, "member not found")}
    assert f"{len(lost)} member{'' if len(lost) == 1 else 's'} with none found" in stdout
    results = json.loads((out / "results.json").read_text())
    test = [r for r in rows if r["split"] == "test"]
    left = sum(bool(r["contradicted"]) for r in test)
    assert results["corpus_check"]["counts"]["left_out_of_metrics"] == left > 0
    m = results["methods"]["loss"]
    assert abs(m["metrics"]["auc"] - _expected_auc(test, "loss", lambda r: True)) < AUC_TOL
    assert abs(m["metrics_without_contradicted"]["auc"]
               - _expected_auc(test, "loss", lambda r: not r["contradicted"])) < AUC_TOL


@pytest.mark.slow
def test_bad_index_input_is_one_sentence(world, tmp_path, capsys):
    base = ["run", "--model", world.model, "--data", world.data, "--methods", "loss",
            "--no-blind", "--device", "cpu"]
    # a folder that is not an index
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, *base, "--index", empty, "--output", tmp_path / "o1")
    assert code == 1 and err.count("\n") == 1, err
    assert f"{empty} is not an infini-gram index: it has no tokenized.N files" in err
    # a tokenizer other than the index's: one sentence with both names
    other = tmp_path / "other-tokenizer"
    save_index_tokenizer(other, ["a wholly different corpus of words " * 5], vocab_size=300)
    code, _, err = run_cli(capsys, *base, "--index", world.index, "--index-tokenizer", other,
                           "--output", tmp_path / "o2")
    assert code == 1 and err.count("\n") == 1, err
    assert f"tokenizer of {world.tokenizer_dir}, not that of {other}" in err
    # a public index (no pddkit manifest) needs its tokenizer named
    public = tmp_path / "public"
    shutil.copytree(world.index, public, ignore=shutil.ignore_patterns("pddkit-index*"))
    code, _, err = run_cli(capsys, *base, "--index", public, "--output", tmp_path / "o3")
    assert code == 1 and "has no pddkit manifest (a public index): name the tokenizer it was " \
        "built with (--index-tokenizer)" in err, err
    # options that need --index
    code, _, err = run_cli(capsys, *base, "--whole-training-set", "--output", tmp_path / "o4")
    assert code == 1 and "--whole-training-set says what a corpus index holds; give --index " \
        "too" in err, err
    code, _, err = run_cli(capsys, *base, "--index", world.index, "--max-overlap", "0",
                           "--output", tmp_path / "o5")
    assert code == 1 and "--max-overlap must be a share in (0, 1], not 0.0" in err, err
    code, _, err = run_cli(capsys, *base, "--index-n", "8", "--output", tmp_path / "o6")
    assert code == 1 and "--index-n sets how texts are checked against a corpus index; give " \
        "--index too" in err, err
    for o in ("o1", "o2", "o3", "o4", "o5", "o6"):  # nothing left behind
        assert not (tmp_path / o).exists()


@pytest.mark.slow
def test_a_public_index_with_its_tokenizer_named(world, tmp_path, capsys):
    public = tmp_path / "public"
    shutil.copytree(world.index, public, ignore=shutil.ignore_patterns("pddkit-index*"))
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "run", "--model", world.model, "--data", world.data,
                                "--methods", "loss", "--index", public, "--index-tokenizer",
                                world.tokenizer_dir, "--output", out, "--bootstrap", "0",
                                "--no-blind", "--no-report", "--device", "cpu")
    assert code == 0, err
    assert (f"(index {public}, tokenizer {world.tokenizer_dir} as given for this public index, "
            "texts queried as given): 5 contradicted") in stdout
    # queried as it was built: the texts are not normalised (these paragraphs have single
    # spaces already, so the same plants are found)
    rows = {r["id"]: r for r in _scores(out)}
    assert {i for i, r in rows.items() if r["contradicted"]} == world.planted
    results = json.loads((out / "results.json").read_text())
    assert results["corpus_check"]["normalize"] is None


@pytest.mark.slow
def test_the_python_api_and_unlabelled_texts(world, tmp_path, capsys):
    import pddkit

    texts = [r["text"] for r in world.rows]
    labels = [r["label"] for r in world.rows]
    result = pddkit.evaluate(texts, labels, str(world.model), "loss", index=[str(world.index)],
                             n_bootstrap=0, blind=False, device="cpu")
    check = result.corpus
    assert {result.ids[i] for i, why in enumerate(check.contradicted) if why} == \
        {str(i) for i, r in enumerate(world.rows) if r["id"] in world.planted}
    assert [o.as_row() for o in check.overlaps] == [world.plain.row(t, N) for t in texts]
    with pytest.raises(pddkit.PddkitError, match="`index` is a list of index folders"):
        pddkit.evaluate(texts, labels, str(world.model), "loss", index=str(world.index))
    # unlabelled: the overlap columns, and no label to check
    data = write_jsonl(tmp_path / "texts.jsonl", [{"id": r["id"], "text": r["text"]}
                                                  for r in world.rows])
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "run", "--model", world.model, "--data", data,
                                "--methods", "loss", "--index", world.index, "--output", out,
                                "--device", "cpu")
    assert code == 0, err
    assert (f"texts measured against the corpus (index {world.index}, tokenizer "
            f"{world.tokenizer_dir}): the share of their 13-grams found is in scores.jsonl; no "
            "labels to check; 1 text shorter than 13 tokens") in stdout
    rows = _scores(out)
    assert all(r["contradicted"] is None for r in rows)
    assert {r["id"] for r in rows if r["overlap"] == 1.0} == {"n0", "n1", "n2", "n3"} | {
        f"m{i}" for i in range(19)}


@pytest.mark.slow
def test_a_sharded_index_one_folder_per_worker(world, tmp_path, capsys):
    """Two workers' folders give the columns the one-folder index gives; one of them alone
    is one sentence naming the worker missing."""
    from transformers import AutoTokenizer

    from pddkit.corpus.build import IndexSettings, build_index

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "docs.jsonl").write_text("".join(json.dumps({"text": d}) + "\n"
                                               for d in world.documents))
    tok = AutoTokenizer.from_pretrained(world.tokenizer_dir)
    parts = [tmp_path / f"part-{w}" for w in (0, 1)]
    for w, folder in enumerate(parts):
        build_index([corpus], tok, str(world.tokenizer_dir), folder,
                    IndexSettings(shards=2, workers=2, worker_id=w, threads=1, memory_gb=1))
    capsys.readouterr()
    base = ["run", "--model", world.model, "--data", world.data, "--methods", "loss",
            "--no-blind", "--no-report", "--bootstrap", "0", "--device", "cpu"]
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, *base, "--index", parts[0], "--index", parts[1],
                           "--output", out)
    assert code == 0, err
    texts = {r["id"]: r["text"] for r in world.rows}
    for r in _scores(out):
        assert {k: r[k] for k in COLUMNS} == world.plain.row(texts[r["id"]], N), r["id"]
        assert bool(r["contradicted"]) == (r["id"] in world.planted)
    code, _, err = run_cli(capsys, *base, "--index", parts[0], "--output", tmp_path / "o")
    assert code == 1 and err.count("\n") == 1, err
    assert "is incomplete: the manifest of worker 1 of 2 is missing" in err
