"""decop on a tiny model: the answers against a plain transformers `generate` and numpy,
batch 1 against 16, a cache rerun that asks nothing again, an OpenAI-compatible server with
top log-probabilities and one giving the letter only, the paraphraser, and `pddkit run` end
to end with its files (scores.jsonl, paraphrases.jsonl, documents.jsonl)."""

from __future__ import annotations

import json
from itertools import permutations

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl

pytestmark = pytest.mark.slow

LETTERS = "ABCD"
# words of the prompt in the tokenizer's training text, so that a quiz item fits 512 tokens
HEADER = ('Question: Which of the following passages is verbatim from the "" book by ? arXiv '
          'paper Options: Answer: A. B. C. D.')
TEXTS = ["the quick brown fox", "jumps over the lazy dog", "a lazy dog sleeps", "brown fox over",
         "the dog jumps", "over the brown dog", "quick lazy fox", "the fox sleeps over"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random two-layer GPT-2 whose weights are large enough (initializer_range 1) for its
    answers to change with the order of the options (at 0.02 it answers one letter always)."""
    import torch
    from tiny_models import small_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    out = tmp_path_factory.mktemp("decop_runs") / "tiny"
    tok = small_tokenizer(HEADER)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=len(tok),
                                       n_positions=512, bos_token_id=0, eos_token_id=0,
                                       initializer_range=1.0))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def lm(tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny).eval(), AutoTokenizer.from_pretrained(tiny)


def paraphrases(t):
    return [f"{t} indeed", f"so {t}", t.upper()]


def inputs(tmp_path, n=8):
    rows = [{"id": f"t{i}", "text": t, "label": (i // 2) % 2, "group": f"book{i // 2}",
             "title": f"Book {i // 2}", "author": "Ann Author"} for i, t in enumerate(TEXTS[:n])]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    para = write_jsonl(tmp_path / "para.jsonl", [{"id": f"t{i}", "paraphrases": paraphrases(t)}
                                                 for i, t in enumerate(TEXTS[:n])])
    return data, para


def hand_prompt(title, options):
    """The SPEC prompt written out by hand (not the module's function)."""
    return (f'Question: Which of the following passages is verbatim from the "{title}" book by '
            f'Ann Author?\nOptions:\nA. {options[0]}\nB. {options[1]}\nC. {options[2]}\n'
            f'D. {options[3]}\n\nAnswer:')


def generate_answer(model, tok, prompt):
    """(letter, the four letters' probabilities) from transformers' greedy `generate` (4
    tokens) and numpy: the scores at the first step whose token strips to a letter, else
    step 1; softmax over the letters' logits."""
    import torch

    ids = [tok.bos_token_id, *tok(prompt, add_special_tokens=False)["input_ids"]]
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=4, do_sample=False, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=0)
    new = out.sequences[0, len(ids):].tolist()
    step = next((s for s, t in enumerate(new) if tok.decode([t]).strip() in list(LETTERS)), 0)
    letter_ids = [tok(x)["input_ids"][-1] for x in LETTERS]
    x = out.scores[step][0, letter_ids].double().numpy()
    p = np.exp(x - x.max())
    p /= p.sum()
    return LETTERS[int(np.argmax(p))], p


def expected(lm, n=8):
    """Per text: (share answered with the verbatim letter, mean probability of it)."""
    model, tok = lm
    out = []
    for i, t in enumerate(TEXTS[:n]):
        options = [t, *paraphrases(t)]
        right, probs = 0, []
        for order in permutations(range(4)):
            item = hand_prompt(f"Book {i // 2}", [options[k] for k in order])
            letter, p = generate_answer(model, tok, item)
            verbatim = order.index(0)
            right += letter == LETTERS[verbatim]
            probs.append(p[verbatim])
        out.append((right / 24, float(np.mean(probs))))
    return out


def test_pddkit_run_scores_the_share_of_verbatim_answers_as_generate_gives_them(capsys, lm, tiny,
                                                                              tmp_path):
    data, para = inputs(tmp_path)
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods",
                             "decop,decop:score=prob", "--paraphrases", para, "--device", "cpu",
                             "--output", tmp_path / "out", "--no-blind", "--bootstrap", "10",
                             "--documents", "mean", "--no-report", "--batch-size", "16")
    assert code == 0, err
    rows = [json.loads(x) for x in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    want = expected(lm)
    share = [r["decop:permutations=24,score=share,chat=auto"] for r in rows]
    prob = [r["decop:permutations=24,score=prob,chat=auto"] for r in rows]
    assert share == [w[0] for w in want]  # whole counts of 24: exact
    assert len(set(share)) > 1  # the model's answers do change with the order
    # generate's logits (batch 1, no padding) against pddkit's (left-padded batches of 16):
    # float32 sums over 32-wide rows in another order, logits |x| < 60 here: < 1e-5 apart,
    # and the softmax of the four moves by less than that
    np.testing.assert_allclose(prob, [w[1] for w in want], atol=1e-5)
    written = [json.loads(x) for x in (tmp_path / "out" / "paraphrases.jsonl").read_text().splitlines()]
    assert written[1] == {"id": "t1", "title": "Book 0", "author": "Ann Author",
                          "paraphrases": paraphrases(TEXTS[1])}
    # per book: the mean of its passages' shares (the reference's per-book score)
    docs = {json.loads(x)["group"]: json.loads(x) for x in
            (tmp_path / "out" / "documents.jsonl").read_text().splitlines()}
    for b in range(4):
        got = docs[f"book{b}"]["mean:decop:permutations=24,score=share,chat=auto"]
        assert got == pytest.approx((share[2 * b] + share[2 * b + 1]) / 2, abs=1e-15)  # one add, one halving
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["counts"]["decop_prompts"] == 8 * 24  # two calls, one set of answers


def test_batch_1_and_16_give_the_same_answers(lm):
    from pddkit.backends.choice import hf_choices

    model, tok = lm
    t = TEXTS[1]
    options = [t, *paraphrases(t)]
    seqs = [[tok.bos_token_id, *tok(hand_prompt("Book 0", [options[k] for k in o]),
                                    add_special_tokens=False)["input_ids"]]
            for o in permutations(range(4))]
    seqs[3] = seqs[3][:40]  # prompts of other lengths: left padding in the batch of 16
    one = hf_choices(model, tok, seqs, batch_size=1, end_ids={0})
    many = hf_choices(model, tok, seqs, batch_size=16, end_ids={0})
    assert [a.letter for a in one] == [a.letter for a in many]
    assert [a.step for a in one] == [a.step for a in many]
    # the same float32 arithmetic in batches of other shapes: as in the run test above
    np.testing.assert_allclose([a.probs for a in one], [a.probs for a in many], atol=1e-5)


def run(tiny, tmp_path, *, cache=None, methods="decop", **options):
    from pddkit.data import load_table
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset

    data, para = inputs(tmp_path, n=4)
    settings = {"model": str(tiny), "device": "cpu", "dtype": "float32",
                "paraphrases": str(para)} | options
    config = RunConfig(methods=methods, n_bootstrap=10, blind=False, cache=cache, **settings)
    return run_dataset(load_table(str(data)), config)


def test_a_rerun_with_the_cache_asks_the_model_nothing(tiny, tmp_path, monkeypatch):
    from pddkit.backends import choice

    cache = str(tmp_path / "cache")
    first = run(tiny, tmp_path, cache=cache)
    assert first.counts["cache"]["decop quiz"] == {"hits": 0, "misses": 96}

    def never(*a, **k):
        raise AssertionError("the rerun asked the model")

    monkeypatch.setattr(choice, "hf_choices", never)
    again = run(tiny, tmp_path, cache=cache)
    assert again.counts["cache"]["decop quiz"] == {"hits": 96, "misses": 0}
    assert (again.scores()["decop"] == first.scores()["decop"]).all()


def test_the_paraphraser_writes_3_paraphrases_per_text_once(tiny, tmp_path, monkeypatch):
    from pddkit.backends import hf

    cache = str(tmp_path / "cache")
    first = run(tiny, tmp_path, cache=cache, paraphrases=None, paraphraser=str(tiny))
    rows = first.trail["paraphrases.jsonl"]
    assert [len(r["paraphrases"]) for r in rows] == [3, 3, 3, 3]
    assert first.counts["paraphrased_texts"] == 4
    assert first.models["paraphraser"]["prompt"].endswith("Rewritten passage:")

    def never(*a, **k):
        raise AssertionError("the rerun sampled again")

    monkeypatch.setattr(hf.HFBackend, "sample", never)
    again = run(tiny, tmp_path, cache=cache, paraphrases=None, paraphraser=str(tiny))
    assert again.trail["paraphrases.jsonl"] == rows
    assert again.counts["cache"]["sampling"] == {"hits": 4, "misses": 0}


# --- an OpenAI-compatible server --------------------------------------------------------

@pytest.fixture(scope="module")
def served(lm):
    from openai_server import FakeOpenAIServer

    model, tok = lm
    with FakeOpenAIServer(model, name="tiny", tokenizer=tok) as server:
        yield server


def run_served(tiny, server, mode, tmp_path, methods="decop"):
    server.reset(mode)
    return run(tiny, tmp_path, methods=methods, model="tiny", backend="openai",
               api_base=server.api_base, api_key_env=None, tokenizer=str(tiny))


def test_a_server_with_top_log_probabilities_gives_the_letters_probabilities(lm, tiny, served, tmp_path):
    res = run_served(tiny, served, "ok", tmp_path, methods="decop,decop:score=prob")
    asked = [r["body"] for r in served.behaviour.requests if "logit_bias" in r["body"]]
    assert len(asked) == 96
    letter_ids = {str(lm[1](x)["input_ids"][-1]) for x in LETTERS}
    assert all(b["max_tokens"] == 1 and b["temperature"] == 0 and b["logprobs"] == 4
               and set(b["logit_bias"]) == letter_ids and set(b["logit_bias"].values()) == {100}
               for b in asked)
    want = expected(lm, n=4)
    scores = res.scores()
    assert list(scores["decop:permutations=24,score=share,chat=auto"]) == [w[0] for w in want]
    # the server's log-probabilities are of the logits biased by +100 in float32 (ulp at 100:
    # 7.6e-6), then softmaxed here: < 1e-4 from generate's unbiased logits
    np.testing.assert_allclose(scores["decop:permutations=24,score=prob,chat=auto"],
                               [w[1] for w in want], atol=1e-4)


def test_a_server_giving_only_the_letter_scores_the_share_and_says_so(lm, tiny, served, tmp_path):
    res = run_served(tiny, served, "no_logprobs", tmp_path)
    assert list(res.scores()["decop"]) == [w[0] for w in expected(lm, n=4)]
    assert any("gave no top log-probabilities for 96 of 96 decop items" in n for n in res.notices)
    from pddkit.errors import PddkitError

    with pytest.raises(PddkitError, match="score=prob needs the letters' log-probabilities"):
        run_served(tiny, served, "no_logprobs", tmp_path, methods="decop:score=prob")


def test_a_server_refusing_logit_bias_is_asked_without_it_and_says_so(tiny, served, tmp_path):
    res = run_served(tiny, served, "reject_logit_bias", tmp_path)
    assert any("refused logit_bias" in n for n in res.notices)
    assert len(res.scores()["decop"]) == 4


def test_the_python_api_takes_title_and_author_from_the_paraphrases_file(lm, tiny, tmp_path):
    import pddkit

    rows = [{"id": f"t{i}", "paraphrases": paraphrases(t), "title": f"Book {i // 2}",
             "author": "Ann Author"} for i, t in enumerate(TEXTS[:4])]
    para = write_jsonl(tmp_path / "para.jsonl", rows)
    res = pddkit.evaluate(TEXTS[:4], [0, 0, 1, 1], str(tiny), methods="decop",
                          ids=[f"t{i}" for i in range(4)], device="cpu", dtype="float32",
                          paraphrases=str(para), n_bootstrap=10, blind=False)
    assert list(res.scores()["decop"]) == [w[0] for w in expected(lm, n=4)]


def test_a_served_paraphraser_is_asked_for_3_seeded_samples_per_text(tiny, served, tmp_path):
    served.reset("ok")
    res = run(tiny, tmp_path, paraphrases=None, paraphraser="tiny", paraphraser_backend="openai",
              paraphraser_api_base=served.api_base, paraphraser_tokenizer=str(tiny), api_key_env=None)
    # the capability probe's own requests (openai_probe.py) ask n=2 and no top_p
    sent = [r["body"] for r in served.behaviour.requests if "top_p" in r["body"]]
    assert len(sent) == 4 and all(b["n"] == 3 and b["temperature"] == 1 and b["top_p"] == 0.95
                                  for b in sent)
    assert len({b["seed"] for b in sent}) == 4  # seeded per text
    assert all(b["prompt"][-1] != 0 for b in sent)  # the prompt, not an empty one
    assert [len(r["paraphrases"]) for r in res.trail["paraphrases.jsonl"]] == [3, 3, 3, 3]
    assert res.models["paraphraser"]["backend"] == "openai"


def test_a_text_too_long_for_its_paraphrase_or_its_quiz_to_fit_is_said(tiny, tmp_path, caplog):
    from pddkit.data import load_table
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset
    from pddkit.errors import PddkitError

    # 252 tokens; its paraphrasing prompt holds 391, which with the start token leaves
    # 512 - 392 = 120 tokens of the tiny model's context, fewer than the text's own
    long = " ".join(["the quick brown fox jumps over the lazy dog"] * 28)
    rows = [{"id": "long", "text": long, "label": 1, "title": "B", "author": "A"},
            {"id": "short", "text": TEXTS[0], "label": 0, "title": "B", "author": "A"}]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    config = RunConfig(model=str(tiny), methods="decop:permutations=4", device="cpu",
                       dtype="float32", paraphraser=str(tiny), n_bootstrap=10, blind=False)
    # its quiz items (the text and 3 paraphrases, ~960 tokens) do not fit either: one sentence
    with pytest.raises(PddkitError, match=r"d.jsonl line 1 holds \d+ tokens, and .* reads at "
                                          r"most 512 \(the text and its 3 paraphrases"):
        run_dataset(load_table(str(data)), config)
    assert "room for fewer tokens than the text itself for 1 of 2 texts (ids 'long'" in caplog.text
