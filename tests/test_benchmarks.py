"""The benchmark loaders of issue 11 against fixture files in each release's own layout
(MIMIR's JSON-string lines and folders, BookMIA's fields, WikiMIA's variants and the
`datasets` Arrow folder), the real ArxivMIA files in ../shared, their one-sentence
errors, and the hub paths offline (the download made to fail: never the network)."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import shared_path

from pddkit.data import BENCHMARKS, load_benchmark
from pddkit.errors import PddkitError
from pddkit.resources import neighbors as nbmod
from pddkit.resources.neighbor_sets import NeighborParams

CACHE = "cache_100_200_1000_512"
SUFFIX = "_neighbors_25_bert_in_place_swap.jsonl"
WANTED = {NeighborParams(10, 0.7, 0): 2}


def lines(path, values):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(v) + "\n" for v in values))
    return path


def mimir_files(root, stem="arxiv_ngram_13_0.8", n_members=3, n_nonmembers=3, cache=CACHE):
    lines(root / cache / "train" / f"{stem}.jsonl", [f"{stem} member text {i}" for i in range(n_members)])
    lines(root / cache / "test" / f"{stem}.jsonl", [f"{stem} other text {i}" for i in range(n_nonmembers)])


def test_every_benchmark_is_registered():
    assert {"wikimia", "wikimia24", "mimir", "bookmia", "arxivmia"} <= {b.name for b in BENCHMARKS}
    assert BENCHMARKS.get("mimir").defaults == {"domain": "all", "split": "ngram_13_0.8"}


# --- MIMIR ---------------------------------------------------------------------------

def test_mimir_one_domain_from_the_release_layout(tmp_path):
    mimir_files(tmp_path)
    ds = load_benchmark("mimir:domain=arxiv", data_dir=tmp_path)
    assert [s.id for s in ds.samples] == [
        "arxiv_ngram_13_0.8/member-0", "arxiv_ngram_13_0.8/member-1", "arxiv_ngram_13_0.8/member-2",
        "arxiv_ngram_13_0.8/nonmember-0", "arxiv_ngram_13_0.8/nonmember-1",
        "arxiv_ngram_13_0.8/nonmember-2"]
    assert [s.label for s in ds.samples] == [1, 1, 1, 0, 0, 0]
    assert ds.samples[0].text == "arxiv_ngram_13_0.8 member text 0" and ds.subsets == []
    assert ds.samples[0].source.endswith(f"{CACHE}/train/arxiv_ngram_13_0.8.jsonl line 1")
    assert ds.samples[0].group is None
    # data_dir may also be the cache folder itself
    assert len(load_benchmark("mimir:domain=arxiv", data_dir=tmp_path / CACHE).samples) == 6


def test_mimir_pairs_by_position_and_splits(tmp_path):
    mimir_files(tmp_path, "github_ngram_7_0.2", n_members=3, n_nonmembers=2)
    ds = load_benchmark("mimir:domain=github,split=ngram_7_0.2", data_dir=tmp_path)
    assert ds.counts()["members"] == 2 and ds.counts()["nonmembers"] == 2
    assert ds.meta["unpaired_left_out"] == 1
    # full_pile lives in its own cache folder and has no split: the default takes its only one
    mimir_files(tmp_path, "full_pile", cache="cache_100_200_10000_512")
    assert len(load_benchmark("mimir:domain=full_pile", data_dir=tmp_path).samples) == 6
    mimir_files(tmp_path, "temporal_arxiv_2021_06")
    ds = load_benchmark("mimir:domain=temporal_arxiv,split=2021_06", data_dir=tmp_path)
    assert ds.samples[0].id == "temporal_arxiv_2021_06/member-0"


def test_mimir_all_domains_in_one_dataset(tmp_path):
    from pddkit.data.benchmarks.mimir import PILE_DOMAINS

    for d in PILE_DOMAINS:
        mimir_files(tmp_path, f"{d}_ngram_13_0.2", 2, 2)
    ds = load_benchmark("mimir:split=ngram_13_0.2", data_dir=tmp_path)
    assert ds.subsets == list(PILE_DOMAINS) and len(ds.samples) == 28
    assert "wikipedia_(en)_ngram_13_0.2/nonmember-1" in {s.id for s in ds.samples}


def test_mimir_bad_input_is_one_sentence(tmp_path):
    mimir_files(tmp_path)
    with pytest.raises(PddkitError, match=r"mimir domain must be one of arxiv, .*temporal_wiki, "
                                          r"all, not 'books'"):
        load_benchmark("mimir:domain=books", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"split of domain arxiv must be one of ngram_13_0.8, "
                                          r"ngram_13_0.2, ngram_7_0.2, not 'ngram_5'"):
        load_benchmark("mimir:domain=arxiv,split=ngram_5", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"must be one of 2020_08, .*2023_06, not 'ngram_13_0.8'"):
        load_benchmark("mimir:domain=temporal_arxiv", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=rf"`data_dir` .* has no {CACHE}/train/"
                                          r"hackernews_ngram_13_0.8.jsonl \(MIMIR's layout\)$"):
        load_benchmark("mimir:domain=hackernews", data_dir=tmp_path)
    (tmp_path / CACHE / "test" / "arxiv_ngram_13_0.8.jsonl").write_text('"fine"\n[1, 2]\n')
    with pytest.raises(PddkitError, match=r"test/arxiv_ngram_13_0.8.jsonl line 2 is a JSON list"):
        load_benchmark("mimir:domain=arxiv", data_dir=tmp_path)


def test_mimir_from_the_hub_downloads_the_raw_files(tmp_path, monkeypatch):
    import huggingface_hub

    mimir_files(tmp_path)
    asked = []

    def fake(repo_id, repo_type, filename):
        asked.append((repo_id, repo_type, filename))
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    assert len(load_benchmark("mimir:domain=arxiv").samples) == 6
    assert asked == [("iamgroot42/mimir", "dataset", f"{CACHE}/train/arxiv_ngram_13_0.8.jsonl"),
                     ("iamgroot42/mimir", "dataset", f"{CACHE}/test/arxiv_ngram_13_0.8.jsonl")]


def test_mimir_sources_without_a_split_as_on_the_hub(tmp_path, monkeypatch):
    """The hub's configs without subsets (c4, full_pile, temporal_wiki) have split `none`
    and files named by the source alone (`c4.jsonl`), from a local copy and by hub id."""
    import huggingface_hub

    mimir_files(tmp_path, "c4", n_members=2, n_nonmembers=2)
    for spec in ("mimir:domain=c4", "mimir:domain=c4,split=none"):
        ds = load_benchmark(spec, data_dir=tmp_path)
        assert [s.id for s in ds.samples] == ["c4/member-0", "c4/member-1", "c4/nonmember-0",
                                              "c4/nonmember-1"]
        assert ds.samples[2].text == "c4 other text 0"
        assert ds.samples[0].source.endswith(f"{CACHE}/train/c4.jsonl line 1")
    with pytest.raises(PddkitError, match=r"split of domain c4 must be one of none, not "
                                          r"'ngram_7_0.2'"):
        load_benchmark("mimir:domain=c4,split=ngram_7_0.2", data_dir=tmp_path)
    mimir_files(tmp_path, "temporal_wiki")
    mimir_files(tmp_path, "full_pile", cache="cache_100_200_10000_512")
    asked = []

    def fake(repo_id, repo_type, filename):
        asked.append(filename)
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    for domain, n in (("c4", 4), ("temporal_wiki", 6), ("full_pile", 6)):
        assert len(load_benchmark(f"mimir:domain={domain},split=none").samples) == n
    assert asked == [f"{CACHE}/train/c4.jsonl", f"{CACHE}/test/c4.jsonl",
                     f"{CACHE}/train/temporal_wiki.jsonl", f"{CACHE}/test/temporal_wiki.jsonl",
                     "cache_100_200_10000_512/train/full_pile.jsonl",
                     "cache_100_200_10000_512/test/full_pile.jsonl"]

def test_mimir_hub_offline_is_one_sentence(monkeypatch):
    import huggingface_hub

    def offline(**kw):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(PddkitError, match=r"^could not download .*arxiv_ngram_13_0.8.jsonl of "
                                          r"iamgroot42/mimir from the hub \(OSError\); offline "
                                          r"users pass `data_dir`"):
        load_benchmark("mimir:domain=arxiv")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(PddkitError, match=r"needs `pip install datasets huggingface_hub`.*; "
                                          r"or download it "
                                          r"and pass `data_dir`"):
        load_benchmark("mimir:domain=arxiv")


def test_mimir_neighbours_are_read_for_the_right_ids(tmp_path):
    mimir_files(tmp_path)
    stem = "arxiv_ngram_13_0.8"
    lines(tmp_path / CACHE / "train_neighbors" / f"{stem}{SUFFIX}",
          [[f"m{i} a", f"m{i} b", f"m{i} c"] for i in range(3)])  # a JSON list per line
    lines(tmp_path / CACHE / "test_neighbors" / f"{stem}{SUFFIX}",
          [{"neighbors": [f"n{i} a", f"n{i} b"]} for i in range(3)])  # or an object
    ds = load_benchmark("mimir:domain=arxiv", data_dir=tmp_path)
    ids = [s.id for s in ds.samples]
    for given in (tmp_path, tmp_path / CACHE, tmp_path / CACHE / "test_neighbors",
                  tmp_path / CACHE / "train_neighbors" / f"{stem}{SUFFIX}"):
        sets = nbmod.load(given, ids, WANTED)
        got = sets.texts[NeighborParams(10, 0.7, 0)]
        assert got[1] == ("m1 a", "m1 b", "m1 c") and got[5] == ("n2 a", "n2 b")
        assert sets.n_generated[NeighborParams(10, 0.7, 0)] == 2  # the fewest any text has
        assert "MIMIR neighbours" in sets.mask_model
    # a subset of the texts (limit, skipped lines) still finds its own lines
    sets = nbmod.load(tmp_path, [ids[2], ids[3]], WANTED)
    assert sets.texts[NeighborParams(10, 0.7, 0)] == (("m2 a", "m2 b", "m2 c"), ("n0 a", "n0 b"))


def test_mimir_neighbour_files_that_do_not_fit_are_one_sentence(tmp_path):
    mimir_files(tmp_path)
    stem = "arxiv_ngram_13_0.8"
    ids = [s.id for s in load_benchmark("mimir:domain=arxiv", data_dir=tmp_path).samples]
    with pytest.raises(PddkitError, match=rf"has no train_neighbors/{stem}{SUFFIX} \(MIMIR's "
                                          r"layout\), which holds the neighbours of "):
        nbmod.load(tmp_path, ids, WANTED)
    lines(tmp_path / CACHE / "train_neighbors" / f"{stem}{SUFFIX}", [["x"]] * 2)
    lines(tmp_path / CACHE / "test_neighbors" / f"{stem}{SUFFIX}", [["y"]] * 3)
    with pytest.raises(PddkitError, match=r"holds neighbours for 2 texts, but the data has "
                                          rf"{stem}/member-2$"):
        nbmod.load(tmp_path, ids, WANTED)
    lines(tmp_path / CACHE / "train_neighbors" / f"{stem}{SUFFIX}", [["x"], 5, ["z"]])
    with pytest.raises(PddkitError, match=r"line 2 is not a list of neighbour texts"):
        nbmod.load(tmp_path, ids, WANTED)


def test_a_file_with_one_line_per_text_in_data_order(tmp_path):
    f = lines(tmp_path / "nb.jsonl", [["a1", "a2"], {"perturbed": ["b1", "b2"]}])
    sets = nbmod.load(f, ["x", "y"], WANTED)
    assert sets.texts[NeighborParams(10, 0.7, 0)] == (("a1", "a2"), ("b1", "b2"))
    with pytest.raises(PddkitError, match=r"holds neighbours for 2 texts, one line each, but the "
                                          r"data has 3 texts"):
        nbmod.load(f, ["x", "y", "z"], WANTED)
    with pytest.raises(PddkitError, match=r"is a folder: only MIMIR's neighbour folders"):
        nbmod.load(tmp_path, ["x", "y"], WANTED)


# --- BookMIA -------------------------------------------------------------------------

def test_bookmia_groups_by_book_and_removes_nul(tmp_path):
    rows = [{"book": "Emma", "snippet_id": 0, "snippet": "It was a fine day\x00 in Highbury.", "label": 1},
            {"book": "Emma", "snippet_id": 1, "snippet": "Mr. Knightley\x00\x00 called.", "label": 1},
            {"book": "New Book", "snippet_id": 0, "snippet": "A story of 2023.", "label": 0}]
    lines(tmp_path / "book_data.jsonl", rows)
    ds = load_benchmark("bookmia", data_dir=tmp_path)
    assert [s.id for s in ds.samples] == ["Emma/0", "Emma/1", "New Book/0"]  # snippet ids repeat
    assert [s.group for s in ds.samples] == ["Emma", "Emma", "New Book"]
    assert ds.samples[0].text == "It was a fine day in Highbury." and ds.labels == [1, 1, 0]
    assert ds.meta["nul_characters_removed"] == 3 and ds.meta["snippets_with_nul"] == 2
    lines(tmp_path / "book_data.jsonl", [dict(r, snippet_id=i) for i, r in enumerate(rows)])
    assert [s.id for s in load_benchmark("bookmia", data_dir=tmp_path).samples] == ["0", "1", "2"]
    with pytest.raises(PddkitError, match=r"^`data_dir` .* has no book_data.jsonl$"):
        load_benchmark("bookmia", data_dir=tmp_path / "nowhere")


def test_bookmia_hub_offline_is_one_sentence(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed (or cannot be imported)
    with pytest.raises(PddkitError, match=r"loading swj0419/BookMIA from the hub needs `pip install datasets "
                                          r"huggingface_hub` \(the extra `hub`: `pip install -e '\.\[hub\]'` "
                                          r"in pddkit's checkout\); or download it and pass `data_dir`"):
        load_benchmark("bookmia")


# --- ArxivMIA ------------------------------------------------------------------------

def test_arxivmia_from_the_release_files():
    folder = shared_path("data", "arxivmia")
    ds = load_benchmark("arxivmia", data_dir=folder)
    assert ds.counts()["members"] == 1000 and ds.counts()["nonmembers"] == 1000
    assert ds.subsets == ["cs", "math"] and ds.language == "en"
    cs = load_benchmark("arxivmia:field=cs,split=test", data_dir=folder)
    assert len(cs.samples) == 640 and cs.subsets == ["cs"]
    assert len(load_benchmark("arxivmia:split=dev", data_dir=folder).samples) == 400
    with pytest.raises(PddkitError, match=r"arxivmia field must be one of all, cs, math, not 'bio'"):
        load_benchmark("arxivmia:field=bio", data_dir=folder)
    with pytest.raises(PddkitError, match=r"arxivmia split must be one of all, dev, test, not 'train'"):
        load_benchmark("arxivmia:split=train", data_dir=folder)


def test_arxivmia_missing_file_and_hub_offline(tmp_path, monkeypatch):
    import huggingface_hub

    with pytest.raises(PddkitError, match=r"has no arxiv_mia_test.jsonl$"):
        load_benchmark("arxivmia:split=test", data_dir=tmp_path)

    def offline(**kw):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(PddkitError, match=r"arxiv_mia.jsonl of zhliu/ArxivMIA from the hub"):
        load_benchmark("arxivmia")


# --- WikiMIA variants and WikiMIA-24 -------------------------------------------------

TEXTS = ["the old bridge over the river was built in 1850 by the town",
         "a new election was held in the spring of this year across the land"]


def perturb(text, j):
    words = text.split()
    words[j + 1] = f"word{j}"
    return " ".join(words)


def test_wikimia_all_lengths_in_one_dataset():
    ds = load_benchmark("wikimia:length=all", data_dir=shared_path("data", "wikimia"))
    assert ds.subsets == ["length=32", "length=64", "length=128", "length=256"]
    assert len(ds.samples) == 776 + 542 + 250 + 82 and ds.samples[0].id == "length=32/1"
    one = load_benchmark("wikimia:length=64", data_dir=shared_path("data", "wikimia"))
    assert one.samples[0].id == "1" and one.subsets == [] and "neighbors" not in one.meta


def test_wikimia_paraphrased_and_bad_variants(tmp_path):
    lines(tmp_path / "WikiMIA_length32_paraphrased.jsonl",
          [{"input": t, "label": 1 - i} for i, t in enumerate(TEXTS)])
    ds = load_benchmark("wikimia:variant=paraphrased", data_dir=tmp_path)
    assert [s.text for s in ds.samples] == TEXTS and ds.name == "wikimia:length=32,variant=paraphrased"
    with pytest.raises(PddkitError, match=r"wikimia variant must be one of original, paraphrased, "
                                          r"perturbed, paraphrased_perturbed, not 'reworded'"):
        load_benchmark("wikimia:variant=reworded", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"variant paraphrased length must be one of 32, 64, 128, "
                                          r"all, not '256'"):
        load_benchmark("wikimia:variant=paraphrased,length=256", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"has no WikiMIA_length64_paraphrased.jsonl \(nor a "
                                          r"WikiMIA_length64_paraphrased Arrow folder\)$"):
        load_benchmark("wikimia:variant=paraphrased,length=64", data_dir=tmp_path)


@pytest.mark.parametrize("layout", ["grouped", "interleaved"])
def test_wikimia_perturbed_rows_become_neighbours(tmp_path, layout):
    lines(tmp_path / "WikiMIA_length32.jsonl", [{"input": t, "label": 1 - i} for i, t in enumerate(TEXTS)])
    k = 3
    order = ([(i, j) for i in range(2) for j in range(k)] if layout == "grouped"
             else [(i, j) for j in range(k) for i in range(2)])
    lines(tmp_path / "WikiMIA_length32_perturbed.jsonl",
          [{"input": perturb(TEXTS[i], j), "label": 1 - i} for i, j in order])
    ds = load_benchmark("wikimia:variant=perturbed", data_dir=tmp_path)
    assert [s.text for s in ds.samples] == TEXTS
    assert ds.meta["neighbors"] == {str(i + 1): [perturb(TEXTS[i], j) for j in range(k)]
                                    for i in range(2)}


def test_wikimia_perturbed_rows_with_a_list_and_misaligned_rows(tmp_path):
    lines(tmp_path / "WikiMIA_length64_paraphrased_perturbed.jsonl",
          [{"input": t, "label": 1 - i, "perturbed_input": [perturb(t, 0), perturb(t, 1)]}
           for i, t in enumerate(TEXTS)])
    ds = load_benchmark("wikimia:variant=paraphrased_perturbed,length=64", data_dir=tmp_path)
    assert ds.meta["neighbors"]["2"] == [perturb(TEXTS[1], 0), perturb(TEXTS[1], 1)]
    lines(tmp_path / "WikiMIA_length32.jsonl", [{"input": t, "label": 1 - i} for i, t in enumerate(TEXTS)])
    lines(tmp_path / "WikiMIA_length32_perturbed.jsonl",
          [{"input": "entirely different words here", "label": 1}] * 4)
    with pytest.raises(PddkitError, match=r"do not line up with the texts of .* \(2 per text"):
        load_benchmark("wikimia:variant=perturbed", data_dir=tmp_path)
    lines(tmp_path / "WikiMIA_length32_perturbed.jsonl", [{"input": TEXTS[0], "label": 1}] * 3)
    with pytest.raises(PddkitError, match=r"has 3 rows, not a whole number of perturbations for "
                                          r"each of the 2 texts"):
        load_benchmark("wikimia:variant=perturbed", data_dir=tmp_path)


def test_wikimia24_from_a_datasets_arrow_folder(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.ipc

    for n in (32, 64):
        folder = tmp_path / f"WikiMIA_length{n}"
        folder.mkdir()
        table = pa.table({"input": [f"{t} ({n})" for t in TEXTS], "label": [1, 0]})
        with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, \
                pyarrow.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        (folder / "state.json").write_text(json.dumps(
            {"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    ds = load_benchmark("wikimia24:length=64", data_dir=tmp_path)
    assert ds.labels == [1, 0] and ds.samples[0].text.endswith("(64)")
    assert ds.samples[0].source.endswith("WikiMIA_length64 row 1")
    with pytest.raises(PddkitError, match=r"has no WikiMIA_length128.jsonl"):
        load_benchmark("wikimia24:length=all", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"wikimia24 length must be one of 32, 64, 128, 256, all"):
        load_benchmark("wikimia24:length=16", data_dir=tmp_path)


def test_wikimia24_hub_offline_is_one_sentence(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(PddkitError, match=r"loading wjfu99/WikiMIA-24 from the hub"):
        load_benchmark("wikimia24")


# --- a data set's own neighbours reach `neighbor` -------------------------------------

def test_neighbours_a_data_set_carries_enable_and_feed_neighbor(tmp_path):
    from pddkit.engine.config import RunConfig
    from pddkit.engine.pass_context import PassContext
    from pddkit.engine.passes import neighbor_pass
    from pddkit.engine.plan import Resources
    from pddkit.methods.base import Need, resolve_methods
    from pddkit.stats import TokenStats

    lines(tmp_path / "WikiMIA_length32.jsonl", [{"input": t, "label": 1 - i} for i, t in enumerate(TEXTS)])
    lines(tmp_path / "WikiMIA_length32_perturbed.jsonl",
          [{"input": perturb(TEXTS[i], j)} for i in range(2) for j in range(2)])
    ds = load_benchmark("wikimia:variant=perturbed", data_dir=tmp_path)
    config = RunConfig(model="unused", methods="all")
    assert Need.NEIGHBORS in Resources.of(config, dataset=ds).available()
    assert Need.NEIGHBORS not in Resources.of(config).available()

    class Ctx(PassContext):
        def stats(self, backend, texts, names, desc):
            return [TokenStats.from_lists([1, 2], [-1.0, -float(len(t))]) for t in texts]

    ctx = Ctx(texts=[s.text for s in ds.samples], names=[s.source for s in ds.samples],
              ids=[s.id for s in ds.samples], calls=tuple(resolve_methods("neighbor", {Need.NEIGHBORS})),
              config=config, target=None, executor=None, load_backend=None,
              given_neighbors=ds.meta["neighbors"])
    ctx.counts["truncated"] = {}
    neighbor_pass(ctx)
    sets = ctx.extras["neighbor_sets"]
    assert sets.texts[NeighborParams(10, 0.7, 0)][1] == tuple(perturb(TEXTS[1], j) for j in range(2))
    assert ctx.counts["neighbor_texts"] == 4 and len(ctx.fields["neighbors"]) == 2
    assert ctx.notices == ["neighbor: the data set holds 2 neighbours per text; n_neighbors=25 "
                           "uses those"]
