"""The copyright-traps benchmark (Meeus et al. 2024) against tiny folders in the release's
layouts (one JSONL file, `datasets` save_to_disk folder or hub Parquet file per split
`seq_len_{L}_n_rep_{R}`; the extra non-members' splits `seq_len_{L}`), its parameters,
its one-sentence errors, the hub path offline (a fake `datasets`), and `pddkit list`."""

from __future__ import annotations

import json
import sys
import types

import pytest
from cli_helpers import run_cli

from pddkit.data import BENCHMARKS, load_benchmark
from pddkit.data.benchmarks.copyright_traps import EXTRA_FOLDER, LENGTHS, REPEATS, extra_split, split_name
from pddkit.errors import PddkitError


def member(n, r, i):
    return f"injected trap {i} of {n} tokens repeated {r} times"


def held_out(n, i):
    return f"held out trap {i} of {n} tokens"


def cell_rows(n, r, k=2):
    """A cell as released: its members, then the held-out traps of its length (the same
    ones in every cell of that length, as the authors compare them)."""
    return ([{"text": member(n, r, i), "label": 1, "perplexity_bucket": i} for i in range(k)]
            + [{"text": held_out(n, i), "label": 0, "perplexity_bucket": i} for i in range(k)])


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def release(root, skip=()):
    for n in LENGTHS:
        for r in REPEATS:
            if split_name(n, r) not in skip:
                write_jsonl(root / f"{split_name(n, r)}.jsonl", cell_rows(n, r))
    return root


def extras(root, k=4, n_lengths=LENGTHS):
    for n in n_lengths:
        write_jsonl(root / EXTRA_FOLDER / f"{extra_split(n)}.jsonl",
                    [{"text": f"extra trap {i} of {n} tokens", "perplexity_bucket": i}
                     for i in range(k)])


def test_registered_with_its_parameters():
    spec = BENCHMARKS.get("copyright-traps")
    assert spec.defaults == {"length": "all", "repeats": "all", "extra": False}


def test_every_cell_with_labels_subsets_and_ids(tmp_path):
    ds = load_benchmark("copyright-traps", data_dir=release(tmp_path))
    assert ds.subsets == [f"length={n},repeats={r}" for n in LENGTHS for r in REPEATS]
    assert len(ds.samples) == 9 * 4 and ds.counts()["members"] == 18
    assert ds.language == "en" and ds.name == "copyright-traps:length=all,repeats=all"
    first = ds.samples[:4]
    assert [s.id for s in first] == [f"seq_len_25_n_rep_10/{i}" for i in (1, 2, 3, 4)]
    assert [s.label for s in first] == [1, 1, 0, 0]
    assert {s.subset for s in first} == {"length=25,repeats=10"}
    assert first[0].text == member(25, 10, 0)
    assert first[0].source.endswith("seq_len_25_n_rep_10.jsonl line 1")
    assert len({s.id for s in ds.samples}) == len(ds.samples)
    # each held-out trap is in the three cells of its length, as released: kept and counted
    assert ds.meta["nonmembers_in_several_subsets"] == 18
    cell = [s for s in ds.samples if s.subset == "length=100,repeats=1000"]
    assert [s.text for s in cell if s.label == 0] == [held_out(100, 0), held_out(100, 1)]


def test_parameters_filter_and_keep_ids(tmp_path):
    release(tmp_path)
    full = {s.id: s.subset for s in load_benchmark("copyright-traps", data_dir=tmp_path).samples}
    ds = load_benchmark("copyright-traps:length=50", data_dir=tmp_path)
    assert ds.subsets == ["length=50,repeats=10", "length=50,repeats=100", "length=50,repeats=1000"]
    ds = load_benchmark("copyright-traps:repeats=1000", data_dir=tmp_path)
    assert ds.subsets == ["length=25,repeats=1000", "length=50,repeats=1000",
                          "length=100,repeats=1000"]
    one = load_benchmark("copyright-traps:length=100,repeats=10", data_dir=tmp_path)
    assert one.subsets == ["length=100,repeats=10"] and one.labels == [1, 1, 0, 0]
    assert one.meta["nonmembers_in_several_subsets"] == 0
    assert all(full[s.id] == s.subset for s in one.samples)


def test_bad_parameters_are_one_sentence(tmp_path):
    release(tmp_path)
    with pytest.raises(PddkitError, match=r"^copyright-traps length must be one of 25, 50, 100, "
                                          r"all, not '30'$"):
        load_benchmark("copyright-traps:length=30", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"^copyright-traps repeats must be one of 10, 100, "
                                          r"1000, all, not '1'$"):
        load_benchmark("copyright-traps:repeats=1", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"extra='maybe' is not a bool"):
        load_benchmark("copyright-traps:extra=maybe", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"has no parameter 'seq_len' \(parameters: length, "
                                          r"repeats, extra\)"):
        load_benchmark("copyright-traps:seq_len=25", data_dir=tmp_path)


def test_a_missing_split_is_one_sentence(tmp_path):
    release(tmp_path, skip={"seq_len_50_n_rep_100"})
    load_benchmark("copyright-traps:length=25", data_dir=tmp_path)  # what is there loads
    with pytest.raises(PddkitError, match=r"^`data_dir` .* has no split seq_len_50_n_rep_100 of "
                                          r"imperial-cpg/copyright-traps: expected "
                                          r"seq_len_50_n_rep_100.jsonl, a seq_len_50_n_rep_100 "
                                          r"folder saved by datasets' save_to_disk, or "
                                          r"data/seq_len_50_n_rep_100-\*.parquet as the hub repo "
                                          r"stores it$"):
        load_benchmark("copyright-traps", data_dir=tmp_path)
    with pytest.raises(PddkitError, match=r"\(nor its folder copyright-traps-extra-non-members\) "
                                          r"has no split seq_len_25 of "
                                          r"imperial-cpg/copyright-traps-extra-non-members"):
        load_benchmark("copyright-traps:length=25,extra=yes", data_dir=tmp_path)


def test_extra_nonmembers_spread_over_the_repeats_of_their_length(tmp_path):
    release(tmp_path)
    extras(tmp_path, k=4)
    ds = load_benchmark("copyright-traps:extra=yes", data_dir=tmp_path)
    assert ds.name == "copyright-traps:length=all,repeats=all,extra=yes"
    added = [s for s in ds.samples if s.id.startswith("extra/")]
    assert len(added) == 12 and ds.meta["extra_nonmembers"] == 12
    assert all(s.label == 0 for s in added)
    by_id = {s.id: s.subset for s in added if s.id.startswith("extra/seq_len_25/")}
    assert by_id == {"extra/seq_len_25/1": "length=25,repeats=10",
                     "extra/seq_len_25/2": "length=25,repeats=100",
                     "extra/seq_len_25/3": "length=25,repeats=1000",
                     "extra/seq_len_25/4": "length=25,repeats=10"}
    assert ds.counts()["nonmembers"] == 18 + 12
    # a filter keeps each extra trap's subset: repeats=100 gets the second of each three
    ds = load_benchmark("copyright-traps:length=25,repeats=100,extra=yes", data_dir=tmp_path)
    assert [s.id for s in ds.samples if s.id.startswith("extra/")] == ["extra/seq_len_25/2"]
    assert ds.subsets == ["length=25,repeats=100"]
    # they may also sit in data_dir itself
    (tmp_path / EXTRA_FOLDER / "seq_len_25.jsonl").rename(tmp_path / "seq_len_25.jsonl")
    assert len(load_benchmark("copyright-traps:length=25,extra=yes", data_dir=tmp_path).samples) == 16


def test_an_extra_trap_labelled_member_or_a_trap_without_label(tmp_path):
    release(tmp_path)
    write_jsonl(tmp_path / EXTRA_FOLDER / "seq_len_25.jsonl",
                [{"text": "extra one", "label": 0}, {"text": "extra two", "label": 1}])
    with pytest.raises(PddkitError, match=r"seq_len_25.jsonl line 2 is an extra non-member trap "
                                          r"labelled 1, not 0 \(use `on_invalid='skip'`"):
        load_benchmark("copyright-traps:length=25,extra=yes", data_dir=tmp_path)
    ds = load_benchmark("copyright-traps:length=25,extra=yes", data_dir=tmp_path, on_invalid="skip")
    assert ds.counts()["skipped"] == 1 and ds.meta["extra_nonmembers"] == 1
    write_jsonl(tmp_path / "seq_len_25_n_rep_10.jsonl", [{"text": "no label here"}])
    with pytest.raises(PddkitError, match=r"seq_len_25_n_rep_10.jsonl line 1 has no label "
                                          r"\(1 = injected trap, 0 = held-out trap\)"):
        load_benchmark("copyright-traps:length=25", data_dir=tmp_path)


def test_a_text_both_injected_and_held_out(tmp_path):
    release(tmp_path)
    rows = cell_rows(25, 100)
    rows[0]["text"] = held_out(25, 0)  # injected in this cell, held out in the two others
    rows[2]["text"] = "another held out trap"
    write_jsonl(tmp_path / "seq_len_25_n_rep_100.jsonl", rows)
    with pytest.raises(PddkitError, match=r"1 text occurs with both labels"):
        load_benchmark("copyright-traps:length=25", data_dir=tmp_path)
    ds = load_benchmark("copyright-traps:length=25", data_dir=tmp_path, on_invalid="skip")
    assert ds.meta["contradicting_labels_left_out"] == 3 and ds.counts()["skipped"] == 3
    assert ds.counts()["contradicting_labels_left_out"] == 3
    rows[2]["text"] = held_out(25, 0)  # and within one cell: counted the same way
    write_jsonl(tmp_path / "seq_len_25_n_rep_100.jsonl", rows)
    ds = load_benchmark("copyright-traps:length=25", data_dir=tmp_path, on_invalid="skip")
    assert ds.meta["contradicting_labels_left_out"] == 4 and ds.counts()["skipped"] == 4


def test_datasets_save_to_disk_and_hub_parquet_layouts(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.ipc
    import pyarrow.parquet

    def table(n, r):
        rows = cell_rows(n, r)
        return pa.table({k: [row[k] for row in rows] for k in ("text", "label", "perplexity_bucket")})

    saved = tmp_path / "saved"  # DatasetDict.save_to_disk: dataset_dict.json + a folder per split
    saved.mkdir()
    (saved / "dataset_dict.json").write_text(json.dumps(
        {"splits": [split_name(n, r) for n in LENGTHS for r in REPEATS]}))
    hub = tmp_path / "hub"  # the hub repo: data/{split}-00000-of-00001.parquet
    (hub / "data").mkdir(parents=True)
    for n in LENGTHS:
        for r in REPEATS:
            folder = saved / split_name(n, r)
            folder.mkdir()
            with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, \
                    pyarrow.ipc.new_stream(sink, table(n, r).schema) as writer:
                writer.write_table(table(n, r))
            (folder / "state.json").write_text(json.dumps(
                {"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
            pyarrow.parquet.write_table(
                table(n, r), hub / "data" / f"{split_name(n, r)}-00000-of-00001.parquet")
    for root, unit in ((saved, "row"), (hub, "row")):
        ds = load_benchmark("copyright-traps", data_dir=root)
        assert len(ds.samples) == 36 and ds.samples[2].label == 0
        assert ds.samples[0].id == "seq_len_25_n_rep_10/1" and f"{unit} 1" in ds.samples[0].source
    assert "seq_len_25_n_rep_10-00000-of-00001.parquet row 1" in ds.samples[0].source


def test_from_the_hub_by_split(monkeypatch):
    asked = []

    def load_dataset(repo, split):
        asked.append((repo, split))
        if repo.endswith("extra-non-members"):
            return [{"text": f"extra {split} {i}", "perplexity_bucket": 0} for i in range(3)]
        n, r = (int(x) for x in split.removeprefix("seq_len_").split("_n_rep_"))
        return cell_rows(n, r)

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    ds = load_benchmark("copyright-traps:length=50,extra=yes")
    assert asked == [("imperial-cpg/copyright-traps", "seq_len_50_n_rep_10"),
                     ("imperial-cpg/copyright-traps", "seq_len_50_n_rep_100"),
                     ("imperial-cpg/copyright-traps", "seq_len_50_n_rep_1000"),
                     ("imperial-cpg/copyright-traps-extra-non-members", "seq_len_50")]
    assert len(ds.samples) == 15 and ds.samples[0].source == (
        "imperial-cpg/copyright-traps seq_len_50_n_rep_10 row 1")
    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed
    with pytest.raises(PddkitError, match=r"loading imperial-cpg/copyright-traps from the hub "
                                          r"needs `pip install datasets huggingface_hub`"):
        load_benchmark("copyright-traps")


def test_listed_by_pddkit_list(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.strip().startswith("copyright-traps "))
    entry = lines[at] + "".join(x for x in lines[at + 1:] if x.startswith(" " * 19))
    assert "defaults: length=all,repeats=all,extra=False" in entry and "Meeus et al. 2024" in entry
