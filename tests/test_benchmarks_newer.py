"""The newer benchmarks against tiny copies written here in each release's published
layout and schema: WikiMIA-25 (hub Parquet shards `data/{split}-*.parquet`, `input`,
`label`), WikiMIA-2024 Hard (`train.jsonl`, `val.jsonl`, `test.jsonl` rows as
filter_articles.py writes them), StackMIAsub (`StackMIAsub.jsonl`: `snippet`, `label`),
BookTection and arXivTection (the CSV columns `ID`, `Example_A`..`Example_D`, `Answer`,
`Label`, `Length`), and the scaling study's Pile collections (`data/{train,validation,test}-*.parquet`
with `text`); every parameter, the label mapping, the hub paths with the download faked,
bad input, and one `pddkit run` per benchmark on a tiny model."""

from __future__ import annotations

import csv
import json
import sys
import types

import numpy as np
import pytest
from cli_helpers import run_cli
from tiny_models import save_tiny_gpt2

from pddkit.data import BENCHMARKS, load_benchmark
from pddkit.errors import PddkitError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def parquet(path, rows, row_group_size=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


class FakeSplit(list):
    """What `datasets.load_dataset(repo, split=...)` gives, as far as the loaders use it."""

    def select(self, idx):
        return FakeSplit(self[i] for i in idx)

    def filter(self, keep):
        return FakeSplit(r for r in self if keep(r))


def fake_datasets(monkeypatch, splits: dict):
    """A `datasets` module whose load_dataset answers from `splits` ({(repo, split): rows})
    and records what was asked."""
    asked = []

    def load_dataset(repo, split):
        asked.append((repo, split))
        return FakeSplit(splits[(repo, split)])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    return asked


def test_all_registered():
    names = {b.name for b in BENCHMARKS}
    assert {"wikimia25", "wikimia24-hard", "stackmia", "booktection", "arxivtection",
            "scaling-mia"} <= names
    assert BENCHMARKS.get("scaling-mia").defaults == {"domain": "arxiv", "seed": 42, "min_chars": 0}
    assert BENCHMARKS.get("booktection").defaults == {"length": "medium"}


# --- WikiMIA-25 ---------------------------------------------------------------------------

def wikimia25_release(root):
    for split in ("WikiMIA_length32", "WikiMIA_length64", "WikiMIA_length128", "paper_subset"):
        parquet(root / "data" / f"{split}-00000-of-00001.parquet",
                [{"input": f"{split} event {i}", "label": i % 2} for i in range(4)])
    return root


def test_wikimia25_lengths_and_labels(tmp_path):
    wikimia25_release(tmp_path)
    ds = load_benchmark("wikimia25:length=64", data_dir=tmp_path)
    assert [(s.id, s.text, s.label) for s in ds.samples] == [
        (f"WikiMIA_length64/{i}", f"WikiMIA_length64 event {i - 1}", (i - 1) % 2) for i in (1, 2, 3, 4)]
    assert ds.subsets == [] and ds.language == "en"
    full = load_benchmark("wikimia25:length=all", data_dir=tmp_path)
    assert full.subsets == ["length=32", "length=64", "length=128"] and len(full.samples) == 12
    paper = load_benchmark("wikimia25:length=paper_subset", data_dir=tmp_path)
    assert next(s.text for s in paper.samples) == "paper_subset event 0"


def test_wikimia25_bad_input_and_hub(tmp_path, monkeypatch):
    with pytest.raises(PddkitError, match="wikimia25 length must be one of 32, 64, 128, all, "
                                          "paper_subset, not '256'"):
        load_benchmark("wikimia25:length=256", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"has no split WikiMIA_length32 of SimMIA/WikiMIA-25: "
                                          r"expected WikiMIA_length32\.jsonl"):
        load_benchmark("wikimia25", data_dir=tmp_path)
    asked = fake_datasets(monkeypatch, {("SimMIA/WikiMIA-25", "WikiMIA_length128"):
                                        [{"input": "an event", "label": 1},
                                         {"input": "a later event", "label": 0}]})
    ds = load_benchmark("wikimia25:length=128")
    assert asked == [("SimMIA/WikiMIA-25", "WikiMIA_length128")]
    assert [s.label for s in ds.samples] == [1, 0]


# --- WikiMIA-2024 Hard -------------------------------------------------------------------

def hard_rows(split, n):
    """As filter_articles.py writes them: per article its 2016 summary (label 1) and the
    summary after the 2024 edits (label 0), sharing `id`; then shuffled."""
    rows = []
    for i in range(n):
        rows.append({"title": f"Article {split} {i}", "date": "2016-05-01",
                     "input": f"old summary of {split} {i}", "id": i, "diff": 40, "label": 1})
        rows.append({"title": f"Article {split} {i}", "date": "2024-07-01",
                     "input": f"new summary of {split} {i}", "id": i, "diff": 40, "label": 0})
    return rows[::-1]


def test_wikimia24_hard_pairs_and_splits(tmp_path):
    for split, stem in (("train", "train"), ("validation", "val"), ("test", "test")):
        jsonl(tmp_path / f"{stem}.jsonl", hard_rows(split, 2))
    ds = load_benchmark("wikimia24-hard", data_dir=tmp_path)
    assert [(s.id, s.label, s.group) for s in ds.samples] == [
        ("test/1", 0, "test/Article test 1"), ("test/2", 1, "test/Article test 1"),
        ("test/3", 0, "test/Article test 0"), ("test/4", 1, "test/Article test 0")]
    assert ds.samples[1].text == "old summary of test 1"  # label 1 = the 2016 version
    assert ds.meta["document_fields"]["test/1"] == {"title": "Article test 1"}
    full = load_benchmark("wikimia24-hard:split=all", data_dir=tmp_path)
    assert full.subsets == ["train", "validation", "test"] and len(full.samples) == 12
    val = load_benchmark("wikimia24-hard:split=validation", data_dir=tmp_path)
    assert val.samples[0].text == "new summary of validation 1"


def test_wikimia24_hard_bad_input_and_hub(tmp_path, monkeypatch):
    with pytest.raises(PddkitError, match="wikimia24-hard split must be one of train, validation, "
                                          "test, all, not 'dev'"):
        load_benchmark("wikimia24-hard:split=dev", data_dir=tmp_path)
    with pytest.raises(PddkitError, match="has no split val of hallisky/wikiMIA-2024-hard"):
        load_benchmark("wikimia24-hard:split=validation", data_dir=tmp_path)
    jsonl(tmp_path / "test.jsonl", [{"title": "A", "input": "text", "id": 0, "label": 2}])
    with pytest.raises(PddkitError, match=r"test\.jsonl line 1 has label 2"):
        load_benchmark("wikimia24-hard", data_dir=tmp_path)
    asked = fake_datasets(monkeypatch, {("hallisky/wikiMIA-2024-hard", "validation"):
                                        hard_rows("validation", 1)})
    assert len(load_benchmark("wikimia24-hard:split=validation").samples) == 2
    assert asked == [("hallisky/wikiMIA-2024-hard", "validation")]


# --- StackMIA ------------------------------------------------------------------------------

def test_stackmia_snippets_and_labels(tmp_path, monkeypatch):
    path = jsonl(tmp_path / "StackMIAsub.jsonl",
                 [{"snippet": "how do I sort a dict", "label": 1},
                  {"snippet": "a question from 2023", "label": 0}])
    ds = load_benchmark("stackmia", data_dir=tmp_path)
    assert [(s.id, s.text, s.label) for s in ds.samples] == [
        ("1", "how do I sort a dict", 1), ("2", "a question from 2023", 0)]
    import huggingface_hub

    asked = []

    def fake(repo_id, repo_type, filename):
        asked.append((repo_id, repo_type, filename))
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    assert len(load_benchmark("stackmia").samples) == 2
    assert asked == [("darklight03/StackMIAsub", "dataset", "StackMIAsub.jsonl")]


def test_stackmia_bad_input(tmp_path):
    with pytest.raises(PddkitError, match=r"has no StackMIAsub\.jsonl"):
        load_benchmark("stackmia", data_dir=tmp_path)
    jsonl(tmp_path / "StackMIAsub.jsonl", [{"snippet": "a post", "label": 1}, {"snippet": "b post"}])
    with pytest.raises(PddkitError, match="line 2 has no label"):
        load_benchmark("stackmia", data_dir=tmp_path)
    jsonl(tmp_path / "StackMIAsub.jsonl", [{"text": "a post", "label": 1}])
    with pytest.raises(PddkitError, match="line 1 has no 'snippet' field"):
        load_benchmark("stackmia", data_dir=tmp_path)


# --- BookTection and arXivTection --------------------------------------------------------

COLUMNS = ["Example_A", "Example_B", "Example_C", "Example_D", "ID", "Answer", "Label"]


def tection_csv(path, rows, columns):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    return path


def book_rows():
    rows = []
    for book, label in (("Old_Book_-_Jane_Doe", "1"), ("New_Book_-_John_Roe", "0")):
        for length in ("small", "medium", "large"):
            for j in range(2):
                answer = "C" if (book.startswith("Old") and j == 1) else "A"
                options = {x: f"{book} {length} {j} paraphrase {x}" for x in "ABCD"}
                options[answer] = f"{book} {length} {j} verbatim,\nwith a newline"
                rows.append({**{f"Example_{x}": v for x, v in options.items()}, "ID": book,
                             "Answer": answer, "Label": label, "Length": length})
    return rows


def test_booktection_verbatim_option_label_and_group(tmp_path):
    tection_csv(tmp_path / "0_BookTection_data.csv", book_rows(), [*COLUMNS, "Length"])
    ds = load_benchmark("booktection", data_dir=tmp_path)
    assert [s.id for s in ds.samples] == ["3", "4", "9", "10"]  # medium rows only
    assert [(s.text, s.label, s.group) for s in ds.samples] == [
        ("Old_Book_-_Jane_Doe medium 0 verbatim,\nwith a newline", 1, "Old_Book_-_Jane_Doe"),
        ("Old_Book_-_Jane_Doe medium 1 verbatim,\nwith a newline", 1, "Old_Book_-_Jane_Doe"),
        ("New_Book_-_John_Roe medium 0 verbatim,\nwith a newline", 0, "New_Book_-_John_Roe"),
        ("New_Book_-_John_Roe medium 1 verbatim,\nwith a newline", 0, "New_Book_-_John_Roe")]
    assert ds.meta["document_fields"]["3"] == {"title": "Old Book", "author": "Jane Doe"}
    full = load_benchmark("booktection:length=all", data_dir=tmp_path)
    assert full.subsets == ["small", "medium", "large"] and len(full.samples) == 12
    small = load_benchmark("booktection:length=small", data_dir=tmp_path / "0_BookTection_data.csv")
    assert [s.id for s in small.samples] == ["1", "2", "7", "8"]


def test_booktection_bad_input(tmp_path):
    with pytest.raises(PddkitError, match=r"has no copy of avduarte333/BookTection: expected "
                                          r"0_BookTection_data\.csv, a CSV file"):
        load_benchmark("booktection", data_dir=tmp_path)
    with pytest.raises(PddkitError, match="booktection length must be one of small, medium, "
                                          "large, all, not 'huge'"):
        load_benchmark("booktection:length=huge", data_dir=tmp_path)
    rows = book_rows()
    rows[3]["Answer"] = "E"
    tection_csv(tmp_path / "0_BookTection_data.csv", rows, [*COLUMNS, "Length"])
    with pytest.raises(PddkitError, match=r"0_BookTection_data\.csv row 4 has Answer 'E'"):
        load_benchmark("booktection", data_dir=tmp_path)
    rows[3]["Answer"], rows[2]["Length"] = "A", "tiny"
    tection_csv(tmp_path / "0_BookTection_data.csv", rows, [*COLUMNS, "Length"])
    with pytest.raises(PddkitError, match="row 3 has Length 'tiny'"):
        load_benchmark("booktection", data_dir=tmp_path)


def arxiv_rows():
    return [{"Example_A": f"{paper} passage {j}", "Example_B": "p1", "Example_C": "p2",
             "Example_D": "p3", "ID": paper, "Answer": "A", "Label": label}
            for paper, label in (("A paper of 2019", 1), ("A paper of 2023", 0)) for j in range(2)]


def test_arxivtection_rows_titles_and_hub(tmp_path, monkeypatch):
    tection_csv(tmp_path / "arXivTection.csv", arxiv_rows(), COLUMNS)
    ds = load_benchmark("arxivtection", data_dir=tmp_path)
    assert [(s.id, s.text, s.label, s.group) for s in ds.samples] == [
        ("1", "A paper of 2019 passage 0", 1, "A paper of 2019"),
        ("2", "A paper of 2019 passage 1", 1, "A paper of 2019"),
        ("3", "A paper of 2023 passage 0", 0, "A paper of 2023"),
        ("4", "A paper of 2023 passage 1", 0, "A paper of 2023")]
    assert ds.meta["document_fields"]["1"] == {"title": "A paper of 2019", "source": "arXiv"}
    tection_csv(tmp_path / "other.csv", arxiv_rows(), COLUMNS)
    with pytest.raises(PddkitError, match="holds 2 CSV files"):
        load_benchmark("arxivtection", data_dir=tmp_path)
    # the DE-COP repository's CSV (0_arXiTection_data.csv) names the title Paper_Name
    repo = tmp_path / "decop"
    repo.mkdir()
    renamed = [{("Paper_Name" if k == "ID" else k): v for k, v in r.items()} for r in arxiv_rows()]
    tection_csv(repo / "0_arXiTection_data.csv", renamed,
                ["Paper_Name" if c == "ID" else c for c in COLUMNS])
    assert [s.group for s in load_benchmark("arxivtection", data_dir=repo).samples] == [
        s.group for s in ds.samples]
    asked = fake_datasets(monkeypatch, {("avduarte333/arXivTection", "train"): arxiv_rows()})
    assert [s.label for s in load_benchmark("arxivtection").samples] == [1, 1, 0, 0]
    assert asked == [("avduarte333/arXivTection", "train")]


# --- The scaling study's Pile collections ------------------------------------------------

N_TRAIN, N_VAL, N_TEST = 11, 2, 3


def pile_release(base, domain="arxiv", n_train=N_TRAIN):
    """The hub repo's layout: train in two shards of row groups of 2, validation, test."""
    docs = {split: [{"text": f"{domain} {split} document {i}" + (" long" * (i % 3)),
                     "meta": {"pile_set_name": domain}} for i in range(n)]
            for split, n in (("train", n_train), ("validation", N_VAL), ("test", N_TEST))}
    half = n_train // 2
    parquet(base / "data" / "train-00000-of-00002.parquet", docs["train"][:half], row_group_size=2)
    parquet(base / "data" / "train-00001-of-00002.parquet", docs["train"][half:], row_group_size=2)
    parquet(base / "data" / "validation-00000-of-00001.parquet", docs["validation"])
    parquet(base / "data" / "test-00000-of-00001.parquet", docs["test"])
    return docs


def test_scaling_mia_members_are_the_authors_draw(tmp_path):
    docs = pile_release(tmp_path)
    ds = load_benchmark("scaling-mia:seed=7", data_dir=tmp_path)
    nonmembers = [s for s in ds.samples if s.label == 0]
    assert [s.id for s in nonmembers] == (["arxiv/validation/0", "arxiv/validation/1"] +
                                          [f"arxiv/test/{i}" for i in range(N_TEST)])
    # datasets' shuffle(seed) is numpy's default_rng(seed).permutation; then select(range(n))
    drawn = np.random.default_rng(7).permutation(N_TRAIN)[:N_VAL + N_TEST]
    members = [s for s in ds.samples if s.label == 1]
    assert [s.id for s in members] == [f"arxiv/train/{i}" for i in drawn]
    assert [s.text for s in members] == [docs["train"][i]["text"] for i in drawn]
    assert [s.text for s in nonmembers] == [d["text"] for d in docs["validation"] + docs["test"]]
    assert ds.subsets == []
    other = load_benchmark("scaling-mia", data_dir=tmp_path)  # seed 42
    assert [s.id for s in other.samples if s.label == 1] == [
        f"arxiv/train/{i}" for i in np.random.default_rng(42).permutation(N_TRAIN)[:5]]


def test_scaling_mia_min_chars_and_domain_folders(tmp_path):
    docs = pile_release(tmp_path / "scaling_mia_the_pile_00_Github", "Github")
    limit = len("Github train document 0") + 1  # keeps the texts ending in " long"
    ds = load_benchmark(f"scaling-mia:domain=github,min_chars={limit},seed=3", data_dir=tmp_path)
    kept = {split: [d["text"] for d in docs[split] if len(d["text"]) > limit] for split in docs}
    assert [s.text for s in ds.samples if s.label == 0] == kept["validation"] + kept["test"]
    n = len(kept["validation"]) + len(kept["test"])
    drawn = np.random.default_rng(3).permutation(len(kept["train"]))[:n]
    assert [s.text for s in ds.samples if s.label == 1] == [kept["train"][i] for i in drawn]
    assert [s.id for s in ds.samples if s.label == 1] == [f"Github/train/{i}" for i in drawn]


def test_scaling_mia_bad_input_and_hub(tmp_path, monkeypatch):
    with pytest.raises(PddkitError, match=r"scaling-mia domain must be one of .*not 'cc'"):
        load_benchmark("scaling-mia:domain=cc", data_dir=tmp_path)
    with pytest.raises(PddkitError, match="has no split validation of "
                                          "parameterlab/scaling_mia_the_pile_00_arxiv"):
        load_benchmark("scaling-mia", data_dir=tmp_path)
    with pytest.raises(PddkitError, match="min_chars must be 0 or more"):
        load_benchmark("scaling-mia:min_chars=-1", data_dir=tmp_path)
    parquet(tmp_path / "nocol" / "data" / "validation-00000-of-00001.parquet", [{"content": "x"}])
    with pytest.raises(PddkitError, match=r"validation-00000-of-00001\.parquet has no 'text' column; "
                                          r"its columns are 'content'"):
        load_benchmark("scaling-mia", data_dir=tmp_path / "nocol")
    pile_release(tmp_path / "small", n_train=3)
    with pytest.raises(PddkitError, match="5 non-members but only 3 train documents"):
        load_benchmark("scaling-mia", data_dir=tmp_path / "small")
    repo = "parameterlab/scaling_mia_the_pile_00_wiki"
    splits = {(repo, s): [{"text": f"wiki {s} {i}"} for i in range(n)]
              for s, n in (("train", 6), ("validation", 1), ("test", 1))}
    asked = fake_datasets(monkeypatch, splits)
    ds = load_benchmark("scaling-mia:domain=wiki,seed=0")
    assert [r for r, _ in asked] == [repo] * 3 and [s for _, s in asked] == ["validation", "test", "train"]
    drawn = np.random.default_rng(0).permutation(6)[:2]
    assert [s.text for s in ds.samples if s.label == 1] == [f"wiki train {i}" for i in drawn]


# --- one run of each on a tiny model ------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("newer") / "tiny")


def _release(name, root):
    if name == "wikimia25":
        wikimia25_release(root)
    elif name == "wikimia24-hard":
        jsonl(root / "test.jsonl", hard_rows("test", 3))
    elif name == "stackmia":
        jsonl(root / "StackMIAsub.jsonl", [{"snippet": f"post number {i}", "label": i % 2}
                                           for i in range(6)])
    elif name == "booktection":
        tection_csv(root / "0_BookTection_data.csv", book_rows(), [*COLUMNS, "Length"])
    elif name == "arxivtection":
        tection_csv(root / "arXivTection.csv", arxiv_rows(), COLUMNS)
    else:
        pile_release(root)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wikimia25", "wikimia24-hard", "stackmia", "booktection",
                                  "arxivtection", "scaling-mia"])
def test_pddkit_run(tiny, tmp_path, capsys, name):
    _release(name, tmp_path / "release")
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--benchmark", name, "--data-dir",
                           tmp_path / "release", "--methods", "loss", "--output", out,
                           "--bootstrap", "10", "--device", "cpu")
    assert code == 0, err
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    expected = load_benchmark(name, data_dir=tmp_path / "release")
    assert [(r["id"], r["label"]) for r in rows] == [(s.id, s.label) for s in expected.samples]
    assert all(isinstance(r["loss"], float) for r in rows)
