"""decop (DE-COP): the items and prompt against hand-written ones, the score on hand-made
answers, the letter read at the right greedy step of a scripted model, the paraphrases
file and the title/author columns, and every bad input through the CLI (one line, exit 1)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl

from pddkit.errors import PddkitError
from pddkit.stats import Observation, TokenStats

EMPTY = TokenStats.from_lists([], [])


# --- items, prompt, score (hand-written) -------------------------------------------------

def test_the_24_orders_are_itertools_order_each_letter_holding_the_verbatim_six_times():
    from pddkit.methods.decop import answer, orders

    got = orders(24)
    # the first six by hand: the verbatim passage (0) at A, the paraphrases in every order
    assert got[:6] == ((0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 1, 3), (0, 2, 3, 1), (0, 3, 1, 2),
                       (0, 3, 2, 1))
    assert got[6] == (1, 0, 2, 3) and got[-1] == (3, 2, 1, 0)
    assert len(set(got)) == 24 and all(sorted(o) == [0, 1, 2, 3] for o in got)
    letters = [answer(o) for o in got]
    assert letters == ["A"] * 6 + ["B", "B", "C", "D", "C", "D"] * 3
    assert {x: letters.count(x) for x in "ABCD"} == {"A": 6, "B": 6, "C": 6, "D": 6}
    assert orders(4) == ((0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2))
    assert [answer(o) for o in orders(4)] == ["A", "D", "C", "B"]


def test_the_prompt_is_the_authors_text_for_a_book_and_for_an_arxiv_paper():
    from pddkit.methods.decop import prompt

    want = ('Question: Which of the following passages is verbatim from the "Dune" book by '
            'Frank Herbert?\nOptions:\nA. one\nB. two\nC. three\nD. four\n\nAnswer:')
    assert prompt("Dune", "Frank Herbert", ["one", "two", "three", "four"]) == want
    want = ('Question: Which of the following passages is verbatim from the arXiv paper '
            '"Attention"?\nOptions:\nA. w\nB. x\nC. y\nD. z\n\nAnswer:')
    assert prompt("Attention", None, ["w", "x", "y", "z"]) == want


def quiz_obs(answers, chat="auto", permutations=24):
    """An Observation whose items are answered `answers` (letter, probs) in orders' order."""
    from pddkit.methods.decop import orders

    return Observation(text="t", target=EMPTY,
                       quiz={(chat, o): a for o, a in zip(orders(permutations), answers)})


def test_the_score_is_the_share_answered_with_the_verbatim_letter_or_its_mean_probability():
    from pddkit.methods.decop import decop

    # the verbatim letter of each item, by hand: items 0-5 start with the verbatim (A);
    # then per first paraphrase, (x,0,y,z) B, (x,0,z,y) B, (x,y,0,z) C, (x,y,z,0) D,
    # (x,z,0,y) C, (x,z,y,0) D
    right = ["A"] * 6 + ["B", "B", "C", "D", "C", "D"] * 3
    always_a = [("A", (0.7, 0.1, 0.1, 0.1))] * 24
    assert decop(quiz_obs(always_a)) == 6 / 24  # a model answering A whatever: chance
    mixed = [(r if i % 3 == 0 else "A", (0.4, 0.3, 0.2, 0.1)) for i, r in enumerate(right)]
    # right where i % 3 == 0 (8 items) and where the answer A is right anyway (items 1,2,4,5)
    assert decop(quiz_obs(mixed)) == 12 / 24
    # mean probability of the verbatim letter: 6 items each at A .4, B .3, C .2, D .1
    assert decop(quiz_obs(mixed), score="prob") == pytest.approx((0.4 + 0.3 + 0.2 + 0.1) / 4,
                                                                 abs=1e-15)  # 24 float adds
    unanswered = [(None, None)] * 24  # a server whose answers were no letter
    assert decop(quiz_obs(unanswered)) == 0.0
    with pytest.raises(PddkitError, match="score=prob needs the letters' log-probabilities"):
        decop(quiz_obs(unanswered), score="prob")
    rot = [("A", None), ("D", None), ("A", None), ("A", None)]  # rotations: A, D, C, B right
    assert decop(quiz_obs(rot, permutations=4), permutations=4) == 2 / 4


@pytest.mark.parametrize("params, says", [
    ({"permutations": 5}, "permutations must be 24"), ({"score": "auc"}, "score must be one of"),
    ({"chat": "maybe"}, "chat must be one of")])
def test_bad_hyperparameters_are_one_sentence(params, says):
    from pddkit.methods.decop import decop

    with pytest.raises(PddkitError, match=says):
        decop(quiz_obs([("A", None)] * 24), **params)


# --- the letter at the first greedy step that spells one (a scripted model) ---------------

class Scripted:
    """A causal LM whose logits at each greedy step are set by hand, per prompt (keyed by
    the prompt's last token): step s gives `script[s-1]` = (greedy token, the four letters'
    logits); every other logit is -10, the greedy token's 20."""

    def __init__(self, vocab: int, scripts: dict, letters: list[int]) -> None:
        import torch

        self.vocab, self.scripts, self.letters = vocab, scripts, letters
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.rows: list = []
        self.step = 0

    def parameters(self):
        yield self.weight

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=None,
                past_key_values=None):
        import torch

        if input_ids.shape[1] > 1:  # the prompt: one script per row
            self.rows = [self.scripts[int(r[-1])] for r in input_ids]
            self.step = 0
        self.step += 1
        logits = torch.full((input_ids.shape[0], 1, self.vocab), -10.0)
        for r, script in enumerate(self.rows):
            greedy, values = script[min(self.step, len(script)) - 1]
            logits[r, 0, self.letters] = torch.tensor(values)
            if greedy not in self.letters:  # a letter is greedy by its own (largest) value
                logits[r, 0, greedy] = 20.0
        return SimpleNamespace(logits=logits, past_key_values=None)

    __call__ = forward


@pytest.mark.slow
def test_the_letters_are_read_at_the_first_greedy_step_that_spells_one_else_step_1():
    from tiny_models import small_tokenizer

    from pddkit.backends.choice import hf_choices

    tok = small_tokenizer("ABCD")
    letters = [tok("A")["input_ids"][-1], tok("B")["input_ids"][-1], tok("C")["input_ids"][-1],
               tok("D")["input_ids"][-1]]
    space, x, end = tok(" ")["input_ids"][-1], tok("x")["input_ids"][-1], 0
    assert tok.decode([space]).strip() == "" and tok.decode([x]) == "x"
    s1, s2, s3, s4 = (1.0, 3.0, 0.5, -1.0), (0.2, 0.1, 0.0, 2.0), (2.0, 0.0, 0.0, 0.0), (0.0, 0.0, 5.0, 1.0)
    scripts = {
        101: [(space, s2), (letters[1], s1), (letters[0], s3)],  # letter at step 2: read s1
        102: [(x, s2), (x, s3), (x, s3), (x, s3), (letters[0], s4)],  # none in 4 steps: step 1
        103: [(end, s3), (letters[2], s4)],  # the row ends at step 1: step 1, never step 2
        104: [(letters[2], s4)],  # the letter at once
    }
    model = Scripted(len(tok), scripts, letters)
    prompts = [[0, 7, 101], [0, 102], [0, 5, 6, 103], [0, 104]]

    def softmax(v):  # numpy, by hand, of the float32 logits the model holds
        x = np.array(v, dtype=np.float32).astype(np.float64)
        e = np.exp(x - x.max())
        return e / e.sum()

    for batch in (1, 4):
        got = hf_choices(model, tok, prompts, batch_size=batch, end_ids={end})
        assert [(g.letter, g.step) for g in got] == [("B", 2), ("D", 1), ("A", 1), ("C", 1)]
        for g, want in zip(got, (s1, s2, s3, s4)):
            # the same float32 logits, softmax in float64 on both sides: a few ulp of 1.0
            np.testing.assert_allclose(g.probs, softmax(want), rtol=1e-12)


@pytest.mark.slow
def test_top_log_probabilities_are_read_by_exact_token_then_by_stripped_text():
    from tiny_models import small_tokenizer

    from pddkit.backends.choice import letter_ids, read_top

    tok = small_tokenizer("ABCD")
    ids = letter_ids(tok)
    got = read_top({"A": -0.5, "ĠB": -1.5, " C": -2.0, "x": -0.1}, tok, ids)
    assert got == [-0.5, -1.5, -2.0, -np.inf]
    assert read_top({"B": -1.0, " B": -0.2}, tok, ids)[1] == -1.0  # the exact token first
    assert read_top({"x": -0.1}, tok, ids) is None


# --- inputs: the paraphrases file and the title / author columns --------------------------

TEXTS = ["the quick brown fox", "jumps over the lazy dog", "a lazy dog sleeps"]


def paraphrase_rows(n=3):
    return [{"id": f"t{i}", "paraphrases": [f"{t} indeed", f"so {t}", t.upper()]}
            for i, t in enumerate(TEXTS[:n])]


def test_a_paraphrases_file_jsonl_or_csv_is_read_with_its_title_and_author(tmp_path):
    import csv

    from pddkit.data.paraphrases import document_fields, load_paraphrases

    rows = paraphrase_rows()
    rows[0]["title"], rows[0]["author"] = "Dune", "Frank Herbert"
    got = load_paraphrases(str(write_jsonl(tmp_path / "p.jsonl", rows)), ["t0", "t1", "t2"], TEXTS)
    assert got.paraphrases["t1"] == ("jumps over the lazy dog indeed", "so jumps over the lazy dog",
                                     "JUMPS OVER THE LAZY DOG")
    path = tmp_path / "p.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "paraphrases", "title", "source"])
        for r in paraphrase_rows():
            w.writerow([r["id"], json.dumps(r["paraphrases"]), "A paper", "arXiv"])
    csv_got = load_paraphrases(str(path), ["t0", "t1", "t2"], TEXTS)
    assert csv_got.paraphrases == got.paraphrases
    docs = document_fields(["t0", "t1@2"], {"t0": {"title": "Emma", "author": "Jane Austen"},
                                            "t1": {"title": "Paper", "source": "arxiv"}})
    assert [(d.title, d.author) for d in docs] == [("Emma", "Jane Austen"), ("Paper", None)]
    docs = document_fields(["t0"], None, csv_got.fields)
    assert (docs[0].title, docs[0].author) == ("A paper", None)


@pytest.fixture
def tiny(tmp_path):
    """A model folder that does not exist: every error below comes before any model loads."""
    return tmp_path / "no-model"


def data_file(tmp_path, title=True, author=True):
    rows = [{"id": f"t{i}", "text": t, "label": i % 2, **({"title": "Book"} if title else {}),
             **({"author": "Ann"} if author else {})} for i, t in enumerate(TEXTS)]
    return write_jsonl(tmp_path / "data.jsonl", rows)


def cli_error(capsys, tiny, tmp_path, *extra):
    code, out, err = run_cli(capsys, "run", "--model", tiny, "--methods", "decop", "--device",
                             "cpu", "--output", tmp_path / "out", "--no-blind", *extra)
    assert code == 1, (out, err)
    lines = [x for x in err.strip().splitlines() if x.startswith("pddkit: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_decop_without_paraphrases_or_paraphraser_is_one_sentence(capsys, tiny, tmp_path):
    line = cli_error(capsys, tiny, tmp_path, "--data", data_file(tmp_path))
    assert "method decop needs a multiple-choice quiz" in line
    assert "--paraphrases" in line and "--paraphraser" in line


def test_a_paraphrases_file_missing_ids_says_the_count_and_the_first_ids(capsys, tiny, tmp_path):
    para = write_jsonl(tmp_path / "p.jsonl", paraphrase_rows(1))
    line = cli_error(capsys, tiny, tmp_path, "--data", data_file(tmp_path), "--paraphrases", para)
    assert "has no paraphrases for 2 of the 3 texts (ids 't1', 't2')" in line


@pytest.mark.parametrize("change, says", [
    (lambda r: r[1]["paraphrases"].pop(),
     "(id 't1') has 2 non-empty paraphrases of 2; decop needs exactly 3"),
    (lambda r: r[2]["paraphrases"].__setitem__(1, " "), "(id 't2') has 2 non-empty paraphrases of 3"),
    (lambda r: r[0]["paraphrases"].__setitem__(2, TEXTS[0]), "paraphrase 3 is the text itself"),
    (lambda r: r.append(dict(r[0])), "line 4 repeats id 't0'"),
])
def test_a_paraphrases_file_decop_cannot_use_is_one_sentence(capsys, tiny, tmp_path, change, says):
    rows = paraphrase_rows()
    change(rows)
    para = write_jsonl(tmp_path / "p.jsonl", rows)
    line = cli_error(capsys, tiny, tmp_path, "--data", data_file(tmp_path), "--paraphrases", para)
    assert says in line


@pytest.mark.parametrize("title, author, says", [
    (False, True, "decop needs a 'title' column in the data (or the paraphrases file): 3 of 3 "
                  "texts have none (ids 't0', 't1', 't2')"),
    (True, False, "decop needs a 'author' column"),
])
def test_texts_without_a_title_or_an_author_are_one_sentence(capsys, tiny, tmp_path, title,
                                                              author, says):
    para = write_jsonl(tmp_path / "p.jsonl", paraphrase_rows())
    line = cli_error(capsys, tiny, tmp_path, "--data", data_file(tmp_path, title, author),
                     "--paraphrases", para)
    assert says in line


def test_decop_is_named_only_and_reads_no_target_statistics():
    from pddkit.methods.base import METHODS, Need

    spec = METHODS.get("decop")
    assert spec.named_only and not spec.reads_target and spec.needs == frozenset({Need.QUIZ})
    assert spec.defaults == {"permutations": 24, "score": "share", "chat": "auto"}


@pytest.mark.slow
def test_chat_models_get_the_prompt_in_their_template_with_the_authors_system_text():
    from tiny_models import small_tokenizer

    from pddkit.engine.decop_pass import _chat_prompt, _use_chat

    tok = small_tokenizer()
    assert not _use_chat("auto", tok, "tiny")
    with pytest.raises(PddkitError, match="chat=yes needs a chat template"):
        _use_chat("yes", tok, "tiny")
    tok.bos_token = "<s>"
    tok.chat_template = ("{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}"
                         "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")
    assert _use_chat("auto", tok, "tiny") and not _use_chat("no", tok, "tiny")
    system = ("You are entering a multiple choice questions exam. You should directly answer "
              "each question by choosing the correct option. Be concise and straight to the "
              "point in your answer. Output only the letter corresponding to the correct "
              "answer.\n\nFormat your answer as '<correct letter>'.")
    # the template's own start token is left out: the backend puts its start token first
    assert _chat_prompt(tok, "Q?") == f"[system]{system}[user]Q?[assistant]"
    tok.chat_template = ("{% for m in messages %}{% if m['role'] == 'system' %}"
                         "{{ raise_exception('no system role') }}{% endif %}[{{ m['role'] }}]"
                         "{{ m['content'] }}{% endfor %}")
    assert _chat_prompt(tok, "Q?") == f"[user]{system}\n\nQ?"


def test_decop_on_the_ray_engine_is_one_sentence(capsys, tiny, tmp_path):
    para = write_jsonl(tmp_path / "p.jsonl", paraphrase_rows())
    line = cli_error(capsys, tiny, tmp_path, "--data", data_file(tmp_path), "--paraphrases", para,
                     "--engine", "ray")
    assert line == ("pddkit: error: decop asks the target model its quiz in this process: run "
                    "it with --engine local")
