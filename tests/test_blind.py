"""The blind baseline: chance on a random split, high on two authors, folds by document."""

import random

import numpy as np
from conftest import shared_path
from sklearn.metrics import roc_auc_score

from pddkit.evaluation.blind import BlindBaseline, verdict
from pddkit.sandbox.corpus import paragraphs, strip_gutenberg


def author_paragraphs(author, n):
    root = shared_path("corpora", "gutenberg", author)
    out = []
    for f in sorted(root.glob("*.txt")):
        text = strip_gutenberg(f.read_text(encoding="utf-8", errors="replace"))
        out += [" ".join(p.split()[:64]) for p in paragraphs(text, 64)]
        if len(out) >= 4 * n:
            break
    random.Random(0).shuffle(out)
    return out[:n]


def test_chance_on_a_random_split():
    texts = author_paragraphs("Doyle, Arthur Conan", 300)
    labels = np.array([random.Random(i).randint(0, 1) for i in range(len(texts))])
    auc = roc_auc_score(labels, BlindBaseline().cross_val_scores(texts, labels))
    assert abs(auc - 0.5) < 0.1, auc
    assert not verdict(auc).warn


def test_separates_two_authors():
    austen, doyle = author_paragraphs("Austen, Jane", 150), author_paragraphs("Doyle, Arthur Conan", 150)
    labels = np.array([1] * len(austen) + [0] * len(doyle))
    auc = roc_auc_score(labels, BlindBaseline().cross_val_scores(austen + doyle, labels))
    assert auc > 0.9, auc
    v = verdict(auc)
    assert v.warn and "prove little" in v.sentence()


def test_folds_keep_a_documents_texts_together():
    """Each document carries an identity token and a random label: without groups the
    classifier learns the identity; with groups it cannot, and falls to chance."""
    rng = random.Random(1)
    texts, labels, groups = [], [], []
    filler = author_paragraphs("Doyle, Arthur Conan", 480)
    for d in range(60):
        label = rng.randint(0, 1)
        for k in range(8):
            texts.append(f"docid{d}x docid{d}y " + " ".join(filler[8 * d + k].split()[:8]))
            labels.append(label)
            groups.append(f"doc{d}")
    labels = np.array(labels)
    free = roc_auc_score(labels, BlindBaseline().cross_val_scores(texts, labels))
    grouped = roc_auc_score(labels, BlindBaseline().cross_val_scores(texts, labels, groups))
    assert free > 0.85, free
    assert abs(grouped - 0.5) < 0.15, grouped


def test_fit_then_predict():
    texts = ["the cat sat", "a dog ran", "the cat ran", "a dog sat"] * 5
    labels = [1, 0, 1, 0] * 5
    model = BlindBaseline().fit(texts, labels)
    assert hasattr(model, "model_")
    p = model.predict_proba(["the cat", "a dog"])
    assert p[0] > p[1]
