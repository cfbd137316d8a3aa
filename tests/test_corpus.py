"""Corpus indexes (`pddkit corpus index|check`): counts against Python counts over the same
token ids, overlap of copied and new texts, planted contradictions, workers, public
indexes, and every bad input as one sentence."""

import gzip
import json
import shutil
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import gutenberg_paragraphs, shared_path

from pddkit.cli import main

pytest.importorskip("infini_gram")

NEW_TEXTS = [  # written for these tests in 2026: in no corpus
    "The quarterly report of the harbour cooperative listed eleven new solar ferries, a "
    "repaired crane and a bakery that now opens before the first tide of the morning.",
    "Our test suite builds a suffix array over a handful of public-domain paragraphs and "
    "then asks it about sentences that nobody has ever typed into any of those books.",
]


def _norm(text: str) -> str:
    """The normalisation the index promises, written out here: NFC, whitespace runs to one
    space, ends stripped."""
    return " ".join(unicodedata.normalize("NFC", text).split())


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    """The real GPT-2 vocabulary (../shared) as a saved tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2TokenizerFast

    folder = shared_path("tokenizers", "gpt2")
    tk = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    out = tmp_path_factory.mktemp("gpt2tok")
    GPT2TokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>",
                      eos_token="<|endoftext|>").save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory, gpt2_dir):
    """A corpus of 40 paragraphs in five formats plus a file that is not text and a JSONL
    line without text; 20 more paragraphs held out; the index built by the CLI (2 shards)."""
    paras = gutenberg_paragraphs(60, seed=3)
    docs, held = paras[:40], paras[40:]
    root = tmp_path_factory.mktemp("corpus")
    src = root / "corpus"
    (src / "sub").mkdir(parents=True)
    for i, t in enumerate(docs[:8]):  # text files: one document each, lines wrapped
        w = t.split(" ")
        (src / f"book{i}.txt").write_text("\n".join(" ".join(w[k:k + 9]) for k in range(0, len(w), 9)))
    lines = [json.dumps({"text": t, "n": i}) for i, t in enumerate(docs[8:20])]
    lines.insert(3, json.dumps({"title": "no text here"}))
    (src / "part.jsonl").write_text("\n".join(lines) + "\n")
    with gzip.open(src / "sub" / "part.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps({"text": t}) + "\n" for t in docs[20:30]))
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    pq.write_table(pa.table({"text": docs[30:35]}), src / "sub" / "rows.parquet")
    (src / "sub" / "more.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(
        "".join(json.dumps({"text": t}) + "\n" for t in docs[35:40]).encode()))
    (src / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    index = root / "index"
    assert main(["corpus", "index", "--corpus", str(src), "--tokenizer", str(gpt2_dir),
                 "--output", str(index), "--shards", "2"]) == 0
    return {"docs": docs, "held": held, "src": src, "index": index, "root": root,
            "tok": str(gpt2_dir)}


def _ids(tok_dir, texts):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tok_dir)
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_stored_ids_and_every_count_equal_python_counts(world):
    from pddkit.corpus.index import open_index

    doc_ids = _ids(world["tok"], [_norm(d) for d in world["docs"]])
    # the shard files hold exactly these documents, each after a 0xFFFF separator
    stored = []
    for s in (0, 1):
        a = np.fromfile(world["index"] / f"tokenized.{s}", dtype="<u2")
        cuts = np.flatnonzero(a == 0xFFFF)
        stored += [a[c + 1:e].tolist() for c, e in zip(cuts, [*cuts[1:], len(a)])]
    assert sorted(map(tuple, stored)) == sorted(map(tuple, doc_ids))
    m = json.loads((world["index"] / "pddkit-index.json").read_text())
    assert m["documents"] == 40 and m["tokens"] == sum(map(len, doc_ids))
    assert m["normalize"] is True and m["token_dtype"] == "u16"
    ix = open_index([world["index"]])
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5, 13):
        counts = Counter(tuple(d[i:i + n]) for d in doc_ids for i in range(len(d) - n + 1))
        queries = list(counts)[:: max(1, len(counts) // 150)]
        # absent ones too: a found n-gram with its last token changed
        queries += [(*q[:-1], int(rng.integers(0, 50000))) for q in queries[:40]]
        for q in queries:
            assert ix.count(list(q)) == counts.get(q, 0), q


def test_a_copied_text_has_overlap_one_and_a_new_text_zero(world):
    from pddkit.corpus.index import open_index
    from pddkit.corpus.overlap import measure_overlap

    doc = world["docs"][2]  # a text file, its lines wrapped every 9 words
    words = doc.split()
    window = "  ".join(words[7:47])  # from inside the document, spaced differently
    ix = open_index([world["index"]])
    copied, new = measure_overlap(ix, [window, NEW_TEXTS[0]])
    assert copied.overlap == 1.0 and copied.longest_match == copied.tokens and copied.count == 1
    assert new.ngrams > 10 and new.ngrams_found == 0 and new.overlap == 0.0 and new.count == 0
    # by hand: the 13-grams of the normalised window are all inside the document's ids
    doc_ids, win_ids = _ids(world["tok"], [_norm(doc), " " + _norm(window)])
    text = " ".join(map(str, doc_ids)) + " "
    assert all(" ".join(map(str, win_ids[i:i + 13])) + " " in text
               for i in range(len(win_ids) - 12))


def _data(path: Path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_planted_contradictions_are_exactly_those_reported(world, tmp_path, capsys):
    docs, held = world["docs"], world["held"]
    rows = [{"id": f"m{i}", "text": docs[i], "label": 1} for i in range(0, 10)]
    rows += [{"id": "m-absent-0", "text": held[0], "label": 1},
             {"id": "m-absent-1", "text": NEW_TEXTS[1], "label": 1}]
    rows += [{"id": f"n{i}", "text": held[i], "label": 0} for i in range(1, 12)]
    rows += [{"id": f"n-planted-{i}", "text": docs[20 + i], "label": 0} for i in range(3)]
    rows += [{"id": "n-short", "text": "Elementary.", "label": 0}]
    data = _data(tmp_path / "d.jsonl", rows)
    out = tmp_path / "check"
    code = main(["corpus", "check", "--index", str(world["index"]), "--data", str(data),
                 "--output", str(out), "--whole-training-set"])
    printed = capsys.readouterr()
    assert code == 0, printed.err  # contradictions are findings, not failures
    got = {json.loads(x)["id"]: json.loads(x)
           for x in (out / "contradictions.jsonl").read_text().splitlines()}
    assert set(got) == {"n-planted-0", "n-planted-1", "n-planted-2", "m-absent-0", "m-absent-1"}
    assert got["n-planted-0"]["text"] == docs[20] and got["m-absent-0"]["contradicted"] == "member not found"
    overlap = {json.loads(x)["id"]: json.loads(x) for x in (out / "overlap.jsonl").read_text().splitlines()}
    assert len(overlap) == len(rows) and overlap["n-short"]["overlap"] is None
    assert all(overlap[f"m{i}"]["overlap"] == 1.0 for i in range(10))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["contradicted"] == 5 and summary["too_short"] == 1
    nonmembers = next(s for s in summary["by_label"] if s["label"] == 0)
    assert nonmembers["texts"] == 15 and nonmembers["checked"] == 14 and nonmembers["contradicted"] == 3
    assert "labels checked against the corpus: 5 contradicted" in printed.out
    assert "n-planted-1" in (out / "report.html").read_text()
    # without --whole-training-set, absent members contradict nothing
    code = main(["corpus", "check", "--index", str(world["index"]), "--data", str(data),
                 "--output", str(tmp_path / "c2")])
    assert code == 0
    assert len((tmp_path / "c2" / "contradictions.jsonl").read_text().splitlines()) == 3


def test_skipped_files_and_lines_are_counted_and_named(world, capsys):
    m = json.loads((world["index"] / "pddkit-index.json").read_text())
    assert m["skipped_files"] == [{"name": "corpus/picture.png", "why": "not text (it holds NUL bytes)"}]
    assert m["skipped_lines"] == 1 and "corpus/part.jsonl line 4" in m["skipped_examples"][0]
    assert {f["name"] for f in m["files"]} >= {"corpus/sub/rows.parquet", "corpus/sub/more.jsonl.zst",
                                               "corpus/sub/part.jsonl.gz", "corpus/book0.txt"}


@pytest.mark.slow
def test_workers_build_one_index_and_a_public_copy_opens_with_its_tokenizer(world, tmp_path, capsys):
    rows = [{"id": f"m{i}", "text": world["docs"][i], "label": 1} for i in range(0, 40, 3)]
    rows += [{"id": f"n{i}", "text": t, "label": 0} for i, t in enumerate(world["held"][:8])]
    data = _data(tmp_path / "d.jsonl", rows)

    def overlaps(*index_args):
        out = tmp_path / f"c{len(list(tmp_path.iterdir()))}"
        assert main(["corpus", "check", *index_args, "--data", str(data), "--output", str(out)]) == 0
        return [json.loads(x) for x in (out / "overlap.jsonl").read_text().splitlines()]

    one = overlaps("--index", str(world["index"]))
    parts = []
    for w in (0, 1):
        parts.append(tmp_path / f"w{w}")
        assert main(["corpus", "index", "--corpus", str(world["src"]), "--tokenizer", world["tok"],
                     "--output", str(parts[-1]), "--shards", "4", "--workers", "2",
                     "--worker-id", str(w)]) == 0
    assert sorted(p.name for p in parts[1].glob("table.*")) == ["table.1", "table.3"]
    capsys.readouterr()
    # one worker's folder alone is refused, by name
    assert main(["corpus", "check", "--index", str(parts[0]), "--data", str(data),
                 "--output", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "manifest of worker 1 of 2 is missing" in err and "1, 3" in err
    assert overlaps("--index", str(parts[0]), "--index", str(parts[1])) == one
    # a public index: the same files without pddkit's manifest
    public = tmp_path / "public"
    public.mkdir()
    for f in world["index"].glob("*.[0-9]"):
        shutil.copy(f, public / f.name)
    assert main(["corpus", "check", "--index", str(public), "--data", str(data),
                 "--output", str(tmp_path / "y")]) == 1
    assert "no pddkit manifest" in capsys.readouterr().err
    # the data are already normalised: queried as given, the same overlaps
    normalised = _data(tmp_path / "dn.jsonl", [r | {"text": _norm(r["text"])} for r in rows])
    out = tmp_path / "pub"
    assert main(["corpus", "check", "--index", str(public), "--index-tokenizer", world["tok"],
                 "--data", str(normalised), "--output", str(out)]) == 0
    assert "queried as given" in capsys.readouterr().out
    assert [json.loads(x) for x in (out / "overlap.jsonl").read_text().splitlines()] == one


def _error(args, capsys) -> str:
    assert main(args) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [x for x in lines if x.startswith("pddkit: error:")]  # warnings may come first
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    return errors[0]


def test_bad_indexes_are_one_sentence(world, tmp_path, capsys, gpt2_dir):
    data = _data(tmp_path / "d.jsonl", [{"text": NEW_TEXTS[0], "label": 0}])

    def check(index, *more):
        return _error(["corpus", "check", "--index", str(index), "--data", str(data),
                       "--output", str(tmp_path / "o"), "--overwrite", *more], capsys)

    empty = tmp_path / "empty"
    empty.mkdir()
    assert "is not an infini-gram index: it has no tokenized.N files" in check(empty)
    assert "does not exist" in check(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    shutil.copytree(world["index"], broken)
    (broken / "table.1").unlink()
    assert f"index {broken} is incomplete: table.1 is missing" in check(broken)
    cut = tmp_path / "cut"
    shutil.copytree(world["index"], cut)
    with (cut / "table.0").open("r+b") as fh:
        fh.truncate(100)
    assert "table.0 is 100 bytes where its manifest says" in check(cut)
    # another tokenizer than the index's: both names
    other = tmp_path / "othertok"
    from tiny_models import small_tokenizer

    small_tokenizer().save_pretrained(other)
    err = check(world["index"], "--index-tokenizer", str(other))
    assert f"built with the tokenizer of {gpt2_dir}, not that of {other}" in err
    # the index's tokenizer moved away: named, and --index-tokenizer finds it
    moved = tmp_path / "moved"
    shutil.copytree(world["index"], moved)
    m = json.loads((moved / "pddkit-index.json").read_text())
    m["tokenizer"]["name"] = str(tmp_path / "gone")
    (moved / "pddkit-index.json").write_text(json.dumps(m))
    err = check(moved)
    assert "cannot be loaded here" in err and "--index-tokenizer" in err
    assert main(["corpus", "check", "--index", str(moved), "--index-tokenizer", str(gpt2_dir),
                 "--data", str(data), "--output", str(tmp_path / "o"), "--overwrite"]) == 0
    capsys.readouterr()
    # a corpus with nothing readable
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "a.bin").write_bytes(bytes(range(256)) * 4)
    err = _error(["corpus", "index", "--corpus", str(junk), "--tokenizer", str(gpt2_dir),
                  "--output", str(tmp_path / "ji")], capsys)
    assert "no corpus file holds text: junk/a.bin (not text (it holds NUL bytes))" in err
    err = _error(["corpus", "index", "--corpus", str(world["src"]), "--tokenizer", str(gpt2_dir),
                  "--output", str(tmp_path / "w"), "--shards", "3", "--workers", "2"], capsys)
    assert "--shards (3) must be a multiple of --workers (2)" in err


@pytest.mark.slow
def test_a_killed_indexing_run_resumes_to_the_same_index(tmp_path, gpt2_dir, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time

    books = sorted(shared_path("corpora", "gutenberg", "Doyle, Arthur Conan").glob("*.txt"))[:12]
    corpus = tmp_path / "books"
    corpus.mkdir()
    for b in books:
        shutil.copy(b, corpus / b.name)
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    # --threads 4: each shard's suffix array in four parts, merged (infini-gram's path for
    # large shards); its counts are checked against Python counts below
    assert main(["corpus", "index", "--corpus", str(corpus), "--tokenizer", str(gpt2_dir),
                 "--output", str(whole), "--shards", "2", "--batch-docs", "1",
                 "--threads", "4"]) == 0
    code = ("from transformers import AutoTokenizer\n"
            "from pddkit.corpus.build import IndexSettings, build_index\n"
            f"tok = AutoTokenizer.from_pretrained({str(gpt2_dir)!r})\n"
            f"build_index([{str(corpus)!r}], tok, {str(gpt2_dir)!r}, {str(resumed)!r}, "
            "IndexSettings(shards=2, batch_docs=1, checkpoint_mb=1))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=os.environ | {"PDDKIT_PROGRESS": "0"})
    progress = resumed / "pddkit-index.progress.worker-0-of-1.json"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if progress.exists() and json.loads(progress.read_text() or "{}").get("next_document", 0) >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = json.loads(progress.read_text())
    assert not state["tokenized"] and 0 < state["next_document"] < len(books)
    assert not (resumed / "pddkit-index.json").exists()
    data = _data(tmp_path / "d.jsonl", [{"text": "x"}])
    assert "has not finished" in _error(["corpus", "check", "--index", str(resumed), "--data",
                                         str(data), "--output", str(tmp_path / "o")], capsys)
    assert main(["corpus", "index", "--corpus", str(corpus), "--tokenizer", str(gpt2_dir),
                 "--output", str(resumed), "--shards", "2", "--batch-docs", "1"]) == 0
    for name in ("tokenized.0", "tokenized.1", "offset.0", "metadata.1", "table.0", "table.1"):
        assert (whole / name).read_bytes() == (resumed / name).read_bytes(), name
    assert not progress.exists()
    # the multi-part suffix arrays count like Python over the stored token ids
    from pddkit.corpus.build import HACK
    from pddkit.corpus.index import open_index

    assert all((whole / f"tokenized.{s}").stat().st_size // 4 >= 2 * HACK for s in (0, 1))
    docs = []
    for s in (0, 1):
        a = np.fromfile(whole / f"tokenized.{s}", dtype="<u2")
        cuts = np.flatnonzero(a == 0xFFFF)
        docs += [a[c + 1:e].tolist() for c, e in zip(cuts, [*cuts[1:], len(a)])]
    ix = open_index([whole])
    rng = np.random.default_rng(1)
    for n in (1, 3, 9, 30):
        counts = Counter(tuple(d[i:i + n]) for d in docs for i in range(len(d) - n + 1))
        keys = list(counts)
        for q in [keys[int(i)] for i in rng.integers(0, len(keys), 150)]:
            assert ix.count(list(q)) == counts[q], q


def test_long_texts_encode_to_the_whole_texts_ids(gpt2_dir):
    from transformers import AutoTokenizer

    from pddkit.corpus.encode import encode_texts
    from pddkit.corpus.normalize import normalize_text

    tok = AutoTokenizer.from_pretrained(gpt2_dir)
    book = sorted(shared_path("corpora", "gutenberg", "Poe, Edgar Allan").glob("*.txt"))[0]
    raw = book.read_text(encoding="utf-8", errors="replace")[:60000]
    texts = [normalize_text(raw), raw, "short text"]  # long ones are cut into pieces
    assert encode_texts(tok, texts) == [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_normalisation_is_nfc_and_single_spaces():
    from pddkit.corpus.normalize import normalize_text

    decomposed = "Cafe\u0301\t au\u00a0lait\n\n  re\u0301sume\u0301  "
    assert normalize_text(decomposed) == "Caf\u00e9 au lait r\u00e9sum\u00e9"
    assert normalize_text(decomposed) == _norm(decomposed)


class _ListIndex:
    """A corpus of one token list, counted by hand: what overlap.py asks of an index."""

    normalize = False

    def __init__(self, corpus, tokenizer):
        self.corpus, self.tokenizer = corpus, tokenizer

    def count(self, ids):
        k = len(ids)
        return sum(self.corpus[i:i + k] == list(ids) for i in range(len(self.corpus) - k + 1))

    def match_lengths(self, ids):
        out = []
        for i in range(len(ids)):
            k = 0
            while i + k < len(ids) and self.count(ids[i:i + k + 1]):
                k += 1
            out.append(k)
        return out


class _SpaceTokenizer:
    """SentencePiece's way with a leading space: " " + text is an extra piece (id 1) before
    the text's own ids (one id per word, 10 + its length)."""

    def encode(self, text, add_special_tokens=False):
        return ([1] if text.startswith(" ") else []) + [10 + len(w) for w in text.split()]


def test_whole_text_counts_once_when_one_spelling_holds_the_other():
    from pddkit.corpus.overlap import measure_overlap

    # "ab cde" is ids [12, 13]; the corpus holds it twice, once after the extra piece 1
    index = _ListIndex([5, 1, 12, 13, 9, 12, 13, 7], _SpaceTokenizer())
    (o,) = measure_overlap(index, ["ab cde"], n=2)
    assert (o.tokens, o.ngrams, o.ngrams_found, o.longest_match, o.count) == (2, 1, 1, 2, 2)


def test_damaged_and_undecodable_corpus_files(tmp_path, gpt2_dir, capsys):
    import zstandard

    lines = "".join(json.dumps({"text": f"document number {i} " * 40}) + "\n" for i in range(2000))
    for name, blob in (("cut.jsonl.gz", gzip.compress(lines.encode())),
                       ("cut.jsonl.zst", zstandard.ZstdCompressor().compress(lines.encode()))):
        folder = tmp_path / name.split(".")[-1]
        folder.mkdir()
        (folder / name).write_bytes(blob[: len(blob) // 2])
        err = _error(["corpus", "index", "--corpus", str(folder), "--tokenizer", str(gpt2_dir),
                      "--output", str(tmp_path / f"ix-{name}")], capsys)
        assert f"corpus file {folder.name}/{name} is damaged" in err and "rerun" in err
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "a.txt").write_bytes(b"plain words " * 1000 + b"caf\xe9 au lait")
    assert main(["corpus", "index", "--corpus", str(latin), "--tokenizer", str(gpt2_dir),
                 "--output", str(tmp_path / "ix-latin")]) == 0
    m = json.loads((tmp_path / "ix-latin" / "pddkit-index.json").read_text())
    assert m["replaced_lines"] == 1 and m["replaced_examples"] == ["latin/a.txt"]


def test_a_run_stopped_after_tokenizing_or_between_suffix_arrays_resumes(world, tmp_path,
                                                                         monkeypatch):
    from transformers import AutoTokenizer

    from pddkit.corpus import build

    tok = AutoTokenizer.from_pretrained(world["tok"])
    settings = build.IndexSettings(shards=2)
    real_sa, real_manifest = build._suffix_array, build._manifest
    for stop in ("second suffix array", "manifest"):
        out = tmp_path / stop.replace(" ", "-")

        def killed(*args, stop=stop, **kw):
            raise KeyboardInterrupt(stop)

        if stop == "manifest":
            monkeypatch.setattr(build, "_manifest", killed)
        else:
            monkeypatch.setattr(build, "_suffix_array", lambda o, s, w, st: (
                real_sa(o, s, w, st) if s == 0 else killed()))
        with pytest.raises(KeyboardInterrupt):
            build.build_index([world["src"]], tok, world["tok"], out, settings)
        monkeypatch.setattr(build, "_suffix_array", real_sa)
        monkeypatch.setattr(build, "_manifest", real_manifest)
        m = build.build_index([world["src"]], tok, world["tok"], out, settings)
        whole = json.loads((world["index"] / "pddkit-index.json").read_text())
        for key in ("documents", "tokens", "skipped_lines", "skipped_examples", "skipped_files",
                    "shard_files"):
            assert m[key] == whole[key], (stop, key)
        for name in ("tokenized.0", "tokenized.1", "table.0", "table.1", "offset.1"):
            assert (out / name).read_bytes() == (world["index"] / name).read_bytes(), (stop, name)


def test_index_folders_that_are_not_one_index(world, tmp_path, capsys, gpt2_dir):
    data = _data(tmp_path / "d.jsonl", [{"text": NEW_TEXTS[0], "label": 0}])

    def check(*folders):
        args = [a for f in folders for a in ("--index", str(f))]
        return _error(["corpus", "check", *args, "--data", str(data), "--output",
                       str(tmp_path / "o"), "--overwrite"], capsys)

    assert "is given twice" in check(world["index"], world["index"])
    assert "is a whole index by itself" in check(world["index"], _copy(world["index"], tmp_path / "b"))
    public = tmp_path / "public"
    public.mkdir()
    for f in world["index"].glob("*.[0-9]"):
        shutil.copy(f, public / f.name)
    assert "has no pddkit manifest but" in check(public, world["index"])
    odd = _copy(world["index"], tmp_path / "odd")
    (odd / "pddkit-index.json").write_text(json.dumps({"format": "x"}))
    assert "is not a pddkit index manifest (it lacks tokenizer" in check(odd)
    (odd / "pddkit-index.json").write_text("[1, 2]")
    assert "is not a pddkit index manifest (it lacks a JSON object)" in check(odd)
    # two workers' parts of different corpora
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in NEW_TEXTS))
    parts = []
    for w, src in ((0, world["src"]), (1, other)):
        parts.append(tmp_path / f"w{w}")
        assert main(["corpus", "index", "--corpus", str(src), "--tokenizer", str(gpt2_dir),
                     "--output", str(parts[-1]), "--shards", "2", "--workers", "2",
                     "--worker-id", str(w)]) == 0
    capsys.readouterr()
    assert "were built from different corpus files" in check(*parts)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
