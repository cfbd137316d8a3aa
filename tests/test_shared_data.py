"""The suite's real data: ../shared is read, and its absence fails CI instead of skipping."""

import pytest
from conftest import shared_path


def test_missing_shared_data_fails_under_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI must run with \.\./shared"):
        shared_path("no-such-folder")
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception):
        shared_path("no-such-folder")


def test_shared_data_is_the_real_thing():
    wikimia = shared_path("data", "wikimia", "WikiMIA_length32.jsonl")
    assert len(wikimia.read_text().splitlines()) == 776
    assert shared_path("tokenizers", "gpt2", "vocab.json").stat().st_size > 1_000_000
