"""The olmo-detect benchmark against a tiny copy of the repository's `benchmark/` tree,
written here in its published layout and schema (ted-tennis/OLMo-Detect at 8ed11cd:
README.md's tree and fields, run_all.py's and evaluate.py's file names): every parameter,
labels from the member / non-member folders, the overlap columns kept per text, DPO's
groups, the one-sentence errors, and one `pddkit run` on a tiny model."""

from __future__ import annotations

import json
import logging

import pytest
from cli_helpers import run_cli
from tiny_models import save_tiny_gpt2

from pddkit.data import BENCHMARKS, load_benchmark
from pddkit.errors import PddkitError

SIZES = ("1b", "7b", "13b", "32b")
K = 2  # rows per file
OVER = 0.25  # one released non-member over the benchmark's 0.2 (pes2o test, line 2)


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def text(rel, i):
    return f"{rel} text number {i}"


def overlap(i, sizes):
    return {f"{s}_13-gram_overlap_score": round(0.01 * (i + 1) + 0.001 * n, 4)
            for n, s in enumerate(sizes)}


def plain(folder, stem, shifted, nonmember_fields):
    """The member files (matched and shifted, or one level) and the non-member files of
    one leaf, test and dev."""
    for split in ("test", "dev"):
        sides = ("matched", "shifted") if shifted else (None,)
        for side in sides:
            rel = (f"{folder}/member/{side}/{split}/member_{stem}_{side}_{split}.jsonl" if side
                   else f"{folder}/member/{split}/member_{stem}_{split}.jsonl")
            yield rel, [{"id": f"m{i}", "text": text(rel, i), "created": "2022-01-01"}
                        for i in range(K)]
        rel = f"{folder}/non-member/{split}/non-member_{stem}_{split}.jsonl"
        yield rel, [{"text": text(rel, i), **nonmember_fields(i)} for i in range(K)]


def dpo(size):
    for split in ("test", "dev"):
        for part in ("chosen", "rejected"):
            for side in ("matched", "shifted"):
                rel = (f"posttraining/dpo/member/{side}/{split}/"
                       f"member_posttraining_dpo_{size}_{part}_{side}_{split}.jsonl")
                # as released: the part's messages, the models, id, source, text; no prompt
                yield rel, [{part: [{"content": f"member prompt {i} {side} {split}",
                                     "role": "user"},
                                    {"content": f"{part} answer", "role": "assistant"}],
                             "chosen_model": "a", "rejected_model": "b",
                             "id": f"allenai/olmo2-{size}-wildchat-unused-on-policy_{i}",
                             "source": f"allenai/olmo2-{size}-wildchat-unused-on-policy",
                             "text": text(rel, i)} for i in range(K)]
            rel = (f"posttraining/dpo/non-member/{split}/"
                   f"non-member_posttraining_dpo_{size}_{part}_{split}.jsonl")
            yield rel, [{"prompt": f"non-member prompt {i} {split}",
                         part: [{"content": f"non-member prompt {i} {split}", "role": "user"},
                                {"content": "an answer", "role": "assistant"}],
                         "text": text(rel, i),
                         f"{size}_prompt_13-gram_overlap_score": 0.0,
                         f"{size}_chosen_13-gram_overlap_score": round(0.05 + 0.01 * i, 4),
                         f"{size}_rejected_13-gram_overlap_score": round(0.07 + 0.01 * i, 4)}
                        for i in range(K)]


def release(root):
    """The whole tree (with the repository's root above benchmark/)."""
    bench = root / "benchmark"
    four = lambda i: overlap(i, SIZES)  # noqa: E731
    files = []
    for d in ("dclm", "pes2o", "openwebmath"):
        files += plain(f"pretraining/{d}", f"pretraining_{d}", True, four)
    for sub in ("java", "python"):
        files += plain("pretraining/starcoder", f"pretraining_starcoder_{sub}", True, four)
    files += plain("midtraining/gsm8k", "midtraining_gsm8k", False, four)
    files += plain("midtraining/gsm8k_qonly", "midtraining_gsm8k_qonly", False, four)
    for sub in ("math", "stackoverflow"):
        files += plain("midtraining/stackexchange", f"midtraining_stackexchange_{sub}", True, four)
    for pair in ("1b-32b", "7b-13b"):
        sizes = tuple(pair.split("-"))
        for sub in ("aya", "wildchat"):
            files += plain(f"posttraining/sft/{pair}", f"posttraining_sft_{pair}_{sub}", True,
                           lambda i, s=sizes: {"messages": [{"role": "user", "content": "hi"}],
                                               **overlap(i, s)})
    for sub in ("cot-gsm8k", "cot-math", "gsm8k_no_cot", "math_no_cot"):
        files += plain("posttraining/rlvr", f"posttraining_rlvr_{sub}", False, four)
    for size in SIZES:
        files += dpo(size)
    for rel, rows in files:
        if rel == "pretraining/pes2o/non-member/test/non-member_pretraining_pes2o_test.jsonl":
            rows[1]["1b_13-gram_overlap_score"] = OVER
        write(bench / rel, rows)
    return root


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return release(tmp_path_factory.mktemp("olmo-detect"))


MAIN = ["pretraining/dclm", "pretraining/pes2o", "pretraining/openwebmath",
        "pretraining/starcoder/java", "pretraining/starcoder/python", "midtraining/gsm8k",
        "midtraining/stackexchange/math", "midtraining/stackexchange/stackoverflow",
        "posttraining/sft/aya", "posttraining/sft/wildchat", "posttraining/dpo/chosen",
        "posttraining/dpo/rejected", "posttraining/rlvr/cot-gsm8k", "posttraining/rlvr/cot-math"]


def test_registered_with_its_parameters():
    assert BENCHMARKS.get("olmo-detect").defaults == {
        "stage": "all", "domain": "all", "subset": "all", "members": "matched", "split": "test",
        "model": "1b"}


def test_the_papers_leaves_with_labels_from_the_folders(repo):
    ds = load_benchmark("olmo-detect", data_dir=repo)
    assert ds.subsets == MAIN  # the ablations (gsm8k_qonly, *_no_cot) only when named
    assert len(ds.samples) == len(MAIN) * 2 * K and ds.counts()["members"] == len(MAIN) * K
    by_id = {s.id: s for s in ds.samples}
    m = by_id["member_pretraining_dclm_matched_test/1"]
    assert (m.label, m.subset) == (1, "pretraining/dclm")
    assert m.text == text("pretraining/dclm/member/matched/test/"
                          "member_pretraining_dclm_matched_test.jsonl", 0)
    n = by_id["non-member_pretraining_dclm_test/2"]
    assert n.label == 0 and n.text.endswith("non-member_pretraining_dclm_test.jsonl text number 1")
    # every text's label is its folder's, nothing else
    assert all((s.label == 1) == s.id.startswith("member_") for s in ds.samples)
    # SFT from the 1B/32B pair's folder, DPO from the 1B files
    assert "member_posttraining_sft_1b-32b_aya_matched_test/1" in by_id
    assert "non-member_posttraining_dpo_1b_rejected_test/2" in by_id


def test_the_repository_or_its_benchmark_folder(repo):
    a = load_benchmark("olmo-detect:domain=dclm", data_dir=repo)
    b = load_benchmark("olmo-detect:domain=dclm", data_dir=repo / "benchmark")
    assert [(s.id, s.text, s.label) for s in a.samples] == [(s.id, s.text, s.label) for s in b.samples]


def test_shifted_members_and_the_leaves_without_them(repo, caplog):
    with caplog.at_level(logging.INFO, logger="pddkit.data.benchmarks.olmo_detect"):
        ds = load_benchmark("olmo-detect:members=shifted", data_dir=repo)
    assert ds.subsets == [s for s in MAIN if "gsm8k" not in s and "rlvr" not in s]
    members = [s.id for s in ds.samples if s.label == 1]
    assert members and all("_shifted_test/" in i for i in members)
    # the non-members are the same files as with matched members
    matched = load_benchmark("olmo-detect", data_dir=repo)
    assert ({s.id for s in ds.samples if s.label == 0}
            <= {s.id for s in matched.samples if s.label == 0})
    assert "no shifted members" in caplog.text
    with pytest.raises(PddkitError, match="midtraining/gsm8k has no shifted members"):
        load_benchmark("olmo-detect:domain=gsm8k,members=shifted", data_dir=repo)


def test_dev_split(repo):
    ds = load_benchmark("olmo-detect:split=dev,stage=midtraining", data_dir=repo)
    assert ds.subsets == ["midtraining/gsm8k", "midtraining/stackexchange/math",
                          "midtraining/stackexchange/stackoverflow"]
    assert {s.id.split("/")[0] for s in ds.samples} == {
        "member_midtraining_gsm8k_dev", "non-member_midtraining_gsm8k_dev",
        "member_midtraining_stackexchange_math_matched_dev",
        "non-member_midtraining_stackexchange_math_dev",
        "member_midtraining_stackexchange_stackoverflow_matched_dev",
        "non-member_midtraining_stackexchange_stackoverflow_dev"}


@pytest.mark.parametrize("spec, subsets", [
    ("stage=pretraining", MAIN[:5]),
    ("stage=posttraining,domain=sft", ["posttraining/sft/aya", "posttraining/sft/wildchat"]),
    ("subset=java", ["pretraining/starcoder/java"]),
    ("domain=starcoder,subset=python", ["pretraining/starcoder/python"]),
    ("domain=rlvr", ["posttraining/rlvr/cot-gsm8k", "posttraining/rlvr/cot-math",
                     "posttraining/rlvr/gsm8k_no_cot", "posttraining/rlvr/math_no_cot"]),
    ("subset=math_no_cot", ["posttraining/rlvr/math_no_cot"]),
    ("domain=gsm8k_qonly", ["midtraining/gsm8k_qonly"]),
    ("domain=DPO", ["posttraining/dpo/chosen", "posttraining/dpo/rejected"]),
])
def test_subset_parameters(repo, spec, subsets):
    assert load_benchmark(f"olmo-detect:{spec}", data_dir=repo).subsets == subsets


def test_model_picks_sft_and_dpo_files_and_the_overlap_column(repo):
    ds = load_benchmark("olmo-detect:stage=posttraining,model=13b", data_dir=repo)
    ids = {s.id for s in ds.samples}
    assert "member_posttraining_sft_7b-13b_wildchat_matched_test/2" in ids
    assert "non-member_posttraining_dpo_13b_chosen_test/1" in ids
    assert not any("1b-32b" in i or "_dpo_1b_" in i for i in ids)
    # SFT 7b-13b non-member line 1 (i=0): 13b is the second size of the pair -> 0.01 + 0.001
    # (values are read back exactly as written: no tolerance)
    assert ds.meta["overlap"]["non-member_posttraining_sft_7b-13b_aya_test/1"] == 0.011
    assert ds.meta["overlap_model"] == "13b"
    # DPO: the scored text's own column (chosen in the chosen file, rejected in the other)
    assert ds.meta["overlap"]["non-member_posttraining_dpo_13b_chosen_test/2"] == 0.06
    assert ds.meta["overlap"]["non-member_posttraining_dpo_13b_rejected_test/2"] == 0.08


def test_overlap_columns_are_kept_per_text(repo, caplog):
    with caplog.at_level(logging.WARNING):
        ds = load_benchmark("olmo-detect:stage=pretraining", data_dir=repo)
    fields = ds.meta["record_fields"]
    assert fields["non-member_pretraining_dclm_test/1"] == {
        "1b_13-gram_overlap_score": 0.01, "7b_13-gram_overlap_score": 0.011,
        "13b_13-gram_overlap_score": 0.012, "32b_13-gram_overlap_score": 0.013}
    assert not any(i.startswith("member_") for i in fields)  # members carry none
    assert set(fields) == {s.id for s in ds.samples if s.label == 0}
    assert ds.meta["overlap"]["non-member_pretraining_dclm_test/2"] == 0.02
    # the one non-member released at or over the benchmark's own 0.2 is counted and named
    assert ds.meta["nonmembers_at_or_over_0.2"] == 1
    assert "non-member_pretraining_pes2o_test/2" in caplog.text
    dpo = load_benchmark("olmo-detect:domain=dpo", data_dir=repo).meta["record_fields"]
    assert dpo["non-member_posttraining_dpo_1b_chosen_test/1"] == {
        "1b_prompt_13-gram_overlap_score": 0.0, "1b_chosen_13-gram_overlap_score": 0.05,
        "1b_rejected_13-gram_overlap_score": 0.07}


def test_dpo_chosen_and_rejected_of_one_prompt_share_a_group(repo):
    ds = load_benchmark("olmo-detect:domain=dpo", data_dir=repo)
    by_id = {s.id: s for s in ds.samples}
    chosen = by_id["member_posttraining_dpo_1b_chosen_matched_test/1"]
    rejected = by_id["member_posttraining_dpo_1b_rejected_matched_test/1"]
    assert chosen.group is not None and chosen.group == rejected.group
    assert chosen.group != by_id["member_posttraining_dpo_1b_chosen_matched_test/2"].group
    groups = {}
    for s in ds.samples:
        groups.setdefault(s.group, set()).add(s.label)
    assert len(groups) == 2 * K and all(len(v) == 1 for v in groups.values())  # one label each


def test_bad_input_is_one_sentence(repo, tmp_path):
    with pytest.raises(PddkitError, match="GitHub repository ted-tennis/OLMo-Detect, not on the "
                                          "Hugging Face hub"):
        load_benchmark("olmo-detect")
    with pytest.raises(PddkitError, match="is not a folder"):
        load_benchmark("olmo-detect", data_dir=tmp_path / "nowhere")
    with pytest.raises(PddkitError, match=r"olmo-detect subset must be one of .*not 'cobol'"):
        load_benchmark("olmo-detect:subset=cobol", data_dir=repo)
    with pytest.raises(PddkitError, match="olmo-detect model must be one of 1b, 7b, 13b, 32b"):
        load_benchmark("olmo-detect:model=70b", data_dir=repo)
    with pytest.raises(PddkitError, match="olmo-detect has no stage pretraining and domain dpo together"):
        load_benchmark("olmo-detect:stage=pretraining,domain=dpo", data_dir=repo)
    with pytest.raises(PddkitError, match="benchmark olmo-detect has no parameter 'length'"):
        load_benchmark("olmo-detect:length=32", data_dir=repo)
    # a missing file: named by its place in the tree
    part = release(tmp_path / "part")
    (part / "benchmark/pretraining/dclm/non-member/test/non-member_pretraining_dclm_test.jsonl").unlink()
    with pytest.raises(PddkitError, match=r"has no pretraining/dclm/non-member/test/"
                                          r"non-member_pretraining_dclm_test\.jsonl"):
        load_benchmark("olmo-detect:domain=dclm", data_dir=part)
    # a row whose own label contradicts its folder, and a line that is not JSON
    bad = part / "benchmark/pretraining/pes2o/member/matched/test/member_pretraining_pes2o_matched_test.jsonl"
    bad.write_text(json.dumps({"text": "a member text", "label": 0}) + "\nnot json\n")
    with pytest.raises(PddkitError, match=r"member_pretraining_pes2o_matched_test.jsonl line 1 "
                                          r"has label 0 but is in the member folder"):
        load_benchmark("olmo-detect:domain=pes2o", data_dir=part)
    with pytest.raises(PddkitError, match=r"member_pretraining_pes2o_matched_test.jsonl "
                                          r"contains no texts \(2 lines skipped as invalid\)"):
        load_benchmark("olmo-detect:domain=pes2o", data_dir=part, on_invalid="skip")
    bad.write_text(json.dumps({"text": "a member text", "label": 0}) + "\n" +
                   json.dumps({"text": "another member text", "label": "member"}) + "\n")
    ds = load_benchmark("olmo-detect:domain=pes2o", data_dir=part, on_invalid="skip")
    assert (ds.counts()["skipped"], ds.counts()["members"], ds.counts()["nonmembers"]) == (1, 1, K)
    assert ds.skipped[0].source.endswith("member_pretraining_pes2o_matched_test.jsonl line 1")


@pytest.mark.slow
def test_pddkit_run_on_the_tree(repo, tmp_path, capsys):
    model = save_tiny_gpt2(tmp_path / "tiny")
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", model, "--benchmark",
                           "olmo-detect:stage=pretraining,model=7b", "--data-dir", repo,
                           "--methods", "loss", "--output", out, "--bootstrap", "10",
                           "--device", "cpu")
    assert code == 0, err
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    expected = load_benchmark("olmo-detect:stage=pretraining,model=7b", data_dir=repo)
    assert [(r["id"], r["label"], r["subset"]) for r in rows] == [
        (s.id, s.label, s.subset) for s in expected.samples]
    assert len(rows) == 5 * 2 * K and all(isinstance(r["loss"], float) for r in rows)
    # the released overlap columns reach scores.jsonl beside the scores
    by_id = {r["id"]: r for r in rows}
    assert by_id["non-member_pretraining_dclm_test/1"]["7b_13-gram_overlap_score"] == 0.011
    assert by_id["non-member_pretraining_dclm_test/1"]["1b_13-gram_overlap_score"] == 0.01
    assert not any("13-gram" in k for r in rows if r["label"] == 1 for k in r)
    res = json.loads((out / "results.json").read_text())
    assert res["counts"]["members"] == 5 * K and res["counts"]["nonmembers"] == 5 * K
