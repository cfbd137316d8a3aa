"""Any table file as data (data/tables.py): JSONL, CSV, TSV, Parquet, a `datasets`
save_to_disk folder; field names; label strings; one sentence for each bad input."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import run_cli

from pddkit.data import DataSource, Fields, load_table
from pddkit.errors import PddkitError

ROWS = [{"snippet": f"text number {i} about {'cats' if i % 2 else 'dogs'}",
         "member": ["member", "nonmember"][i % 2], "book": f"b{i // 4}", "part": f"p{i % 3}",
         "key": f"k{i}"} for i in range(12)]
FIELDS = Fields(text="snippet", label="member", id="key", group="book", subset="part")


def check(ds, n=12):
    assert len(ds.samples) == n
    s = ds.samples[1]
    assert (s.text, s.label, s.id, s.group, s.subset) == (ROWS[1]["snippet"], 0, "k1", "b0", "p1")
    assert ds.labels == [1 - i % 2 for i in range(n)]
    assert ds.subsets == ["p0", "p1", "p2"]


def write_delimited(path, rows, sep):
    cols = list(rows[0])
    path.write_text("\n".join([sep.join(cols), *(sep.join(str(r[c]) for c in cols) for r in rows)]) + "\n")
    return path


def test_csv_tsv_parquet_and_arrow_folders_read_the_same(tmp_path):
    check(load_table(write_delimited(tmp_path / "d.csv", ROWS, ","), FIELDS))
    check(load_table(write_delimited(tmp_path / "d.tsv", ROWS, "\t"), FIELDS))
    table = pa.Table.from_pylist(ROWS)
    pq.write_table(table, tmp_path / "d.parquet")
    check(load_table(tmp_path / "d.parquet", FIELDS))
    # a datasets save_to_disk folder: state.json + data-*.arrow (IPC stream format)
    folder = tmp_path / "saved" / "train"
    folder.mkdir(parents=True)
    for k, part in enumerate((table.slice(0, 5), table.slice(5))):
        with pa.OSFile(str(folder / f"data-0000{k}-of-00002.arrow"), "wb") as sink, \
                pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(part)
    (folder / "state.json").write_text(json.dumps({"_data_files": [
        {"filename": "data-00000-of-00002.arrow"}, {"filename": "data-00001-of-00002.arrow"}]}))
    check(load_table(folder, FIELDS))
    (tmp_path / "saved" / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    check(load_table(tmp_path / "saved", FIELDS))  # a DatasetDict with one split
    with pytest.raises(PddkitError, match=r"holds the splits train, not 'test' \(choose one with "
                                          r"`data_split`\)"):
        load_table(tmp_path / "saved", FIELDS, split="test")


@pytest.mark.parametrize("label,want", [("1", 1), ("0", 0), ("true", 1), ("False", 0),
                                        ("member", 1), ("nonmember", 0), ("Non-member", 0)])
def test_label_strings(tmp_path, label, want):
    path = tmp_path / "d.csv"
    path.write_text(f"text,label\nhello there,{label}\nanother one,{1 - want}\n")
    assert load_table(path).labels == [want, 1 - want]


def test_a_csv_is_never_read_as_json_and_its_errors_name_the_line(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text('text,label\nfine,1\n"a quoted\nmultiline text",maybe\n')
    with pytest.raises(PddkitError) as err:
        load_table(path)
    msg = str(err.value)
    assert f"{path} line 4 has label 'maybe'" in msg and "JSON" not in msg
    ds = load_table(path, on_invalid="skip")
    assert len(ds.samples) == 1 and ds.skipped[0].source == f"{path} line 4"


def test_an_empty_label_cell_means_unlabelled_and_missing_columns_are_named(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\nhello,\nworld,\n")
    assert not load_table(path).labelled
    path.write_text("body,label\nhello,1\n")
    with pytest.raises(PddkitError) as err:
        load_table(path)
    assert str(err.value) == (f"{path} has no 'text' (or 'input') column; its columns are 'body', "
                              "'label' (name the text column with `text_field`)")
    pq.write_table(pa.Table.from_pylist([{"body": "x"}]), tmp_path / "d.parquet")
    with pytest.raises(PddkitError, match="has no 'snippet' column; its columns are 'body'"):
        load_table(tmp_path / "d.parquet", Fields(text="snippet"))
    with pytest.raises(PddkitError, match="has no 'is_member' label column; its columns are 'body'"):
        load_table(tmp_path / "d.parquet", Fields(text="body", label="is_member"))


def test_a_missing_path_and_an_offline_hub_id_are_one_sentence(tmp_path, monkeypatch):
    with pytest.raises(PddkitError, match="does not exist"):
        load_table(tmp_path / "nope.csv")
    import pddkit.data.hub as hub

    class OfflineDatasets:  # datasets.load_dataset with no network
        @staticmethod
        def load_dataset(repo, split):
            raise ConnectionError("no network")

    monkeypatch.setattr(hub, "_hub_module", lambda module, repo: OfflineDatasets)
    with pytest.raises(PddkitError) as err:
        load_table("someone/some-set")
    assert str(err.value) == ("could not load someone/some-set split train from the hub "
                              "(ConnectionError); offline users pass `data_dir` with the JSONL files")
    monkeypatch.undo()
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(PddkitError, match=r"needs `pip install datasets huggingface_hub`"):
        load_table("someone/some-set")


def test_benchmarks_refuse_field_options():
    with pytest.raises(PddkitError, match="a benchmark knows its own fields"):
        DataSource(benchmark="wikimia", fields=Fields(text="x")).load()


def test_language_is_recorded(tmp_path):
    path = write_delimited(tmp_path / "d.csv", ROWS, ",")
    assert DataSource(data=path, fields=FIELDS, language="zh").load().language == "zh"


def test_pddkit_blind_reads_a_csv_with_its_field_names(tmp_path, capsys):
    rows = [{"snippet": f"{'an old' if i % 2 else 'a brand new'} story number {i} "
                        f"{'yesterday' if i % 2 else 'tomorrow'}", "member": i % 2, "key": i}
            for i in range(40)]
    path = write_delimited(tmp_path / "d.csv", rows, ",")
    code, out, err = run_cli(capsys, "blind", "--data", path, "--text-field", "snippet",
                             "--label-field", "member", "--id-field", "key", "--bootstrap", "50",
                             "--output", tmp_path / "out")
    assert code == 0, err
    assert "20 members, 20 non-members" in out
    scores = [json.loads(x) for x in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    assert [r["id"] for r in scores] == [str(i) for i in range(40)]
    code, _, err = run_cli(capsys, "blind", "--data", path, "--bootstrap", "50")
    assert code == 1 and "has no 'text' (or 'input') column" in err and "--text-field" in err


def test_named_fields_a_file_lacks_are_one_sentence_in_every_format(tmp_path):
    jl = tmp_path / "d.jsonl"
    jl.write_text(json.dumps({"body": "hello", "Book": "b1"}) + "\n")
    with pytest.raises(PddkitError) as err:
        load_table(jl, Fields(text="body", group="chapter"))
    assert str(err.value) == (f"{jl} line 1 has no 'chapter' group column; its columns are "
                              "'body', 'Book'")
    with pytest.raises(PddkitError, match="has no 'text' \\(or 'input'\\) column; its columns are "
                                          "'body', 'Book' \\(name the text column"):
        load_table(jl)  # not "use on_invalid='skip'", which would skip every line
    csv_path = write_delimited(tmp_path / "d.csv", [{"text": "x", "Book": "b"}], ",")
    with pytest.raises(PddkitError, match="has no 'chapter' group column"):
        load_table(csv_path, Fields(group="chapter"))


def test_bom_long_cells_and_extra_cells(tmp_path):
    path = tmp_path / "excel.csv"
    book = "word " * 60000  # a cell larger than the csv module's default limit
    path.write_bytes(("\ufefftext,label\n" + f"{book},1\nshort,0\n").encode("utf-8"))
    ds = load_table(path)
    assert ds.labels == [1, 0] and len(ds.samples[0].text) == len(book)
    path.write_text("text,label\nfine,1\ntoo,0,many\n")
    with pytest.raises(PddkitError, match=r"line 3 has 1 more cells than the header's 2 columns"):
        load_table(path)
    jl = tmp_path / "bom.jsonl"
    jl.write_bytes(("\ufeff" + json.dumps({"text": "a", "label": 1}) + "\n").encode("utf-8"))
    assert load_table(jl).labels == [1]


def test_a_missing_local_file_is_not_taken_for_a_hub_id(tmp_path):
    with pytest.raises(PddkitError, match=r"^data file data/x\.jsonl does not exist$"):
        load_table("data/x.jsonl")


def test_counts_of_what_a_loader_changed_reach_the_dataset_counts(tmp_path):
    jl = tmp_path / "d.jsonl"
    jl.write_text(json.dumps({"text": "a"}) + "\n\n\n" + json.dumps({"text": "b"}) + "\n")
    assert load_table(jl).counts()["blank_lines"] == 2


def test_a_builders_recorded_language_is_read(tmp_path):
    (tmp_path / "data.jsonl").write_text(json.dumps({"text": "专利", "label": 1}) + "\n"
                                         + json.dumps({"text": "发明", "label": 0}) + "\n")
    (tmp_path / "manifest.json").write_text(json.dumps({"builder": "patentmia", "language": "zh"}))
    assert load_table(tmp_path / "data.jsonl").language == "zh"
    assert load_table(tmp_path / "data.jsonl", language="en").language == "en"


def test_options_that_would_be_ignored_are_refused(tmp_path):
    path = write_delimited(tmp_path / "d.csv", ROWS, ",")
    with pytest.raises(PddkitError, match="one file, without splits: `data_split`"):
        load_table(path, FIELDS, split="test")
    with pytest.raises(PddkitError, match="`data_dir` is the folder of a `benchmark`'s files"):
        DataSource(data=path, fields=FIELDS, data_dir=tmp_path).load()
