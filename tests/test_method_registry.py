"""The method registry: what each method declares (needs, backend capabilities, grid) and
resolve_methods skipping, with a one-line notice, what a backend cannot serve."""

import dataclasses
import logging
from types import SimpleNamespace

import numpy as np
import pytest

from pddkit.errors import PddkitError
from pddkit.methods import METHODS, Need, register_method, resolve_methods
from pddkit.methods.base import REQUIREMENTS, unmet
from pddkit.methods.grid import Grid

EVERY_NEED = set(Need)
LOG_PROBS_ONLY = SimpleNamespace(full_distribution=False, hidden_states=False, local_model=False)
LOCAL = SimpleNamespace(full_distribution=True, hidden_states=True, local_model=True)


def names(calls):
    return [c.spec.name for c in calls]


def test_requirements_are_backend_capability_fields():
    """Plain strings in methods/, checked here against backends (the test may import it)."""
    from pddkit.backends.base import Capabilities

    fields = {f.name for f in dataclasses.fields(Capabilities)}
    assert set(REQUIREMENTS) <= fields
    for m in METHODS:
        assert m.requires <= fields, m.name


def test_what_the_built_in_methods_read():
    assert METHODS.get("minkpp").requires == {"full_distribution"}
    assert METHODS.get("gapk").requires == {"full_distribution"}
    assert METHODS.get("gapk").reads == {"Lmax"}  # asked of the cache by the target pass
    assert METHODS.get("acmia").reads == {"tempered"}  # asked of the pass, computed on request
    assert all(not m.reads for m in METHODS if m.name not in ("gapk", "acmia"))
    assert METHODS.get("surp").requires == {"full_distribution"}
    assert METHODS.get("probe").requires == {"hidden_states", "local_model"}
    for name in ("loss", "zlib", "lowercase", "ref", "mink", "dcpdd", "neighbor"):
        assert METHODS.get(name).requires == frozenset(), name


def test_spec_carries_what_a_listing_needs():
    """`pddkit list`: needs, backend requirements, defaults, grid values."""
    for m in METHODS:
        assert isinstance(m.needs, frozenset) and isinstance(m.requires, frozenset)
        assert isinstance(m.defaults, dict) and m.paper and m.summary
        if m.grid is not None:
            assert set(m.grid.values) <= set(m.defaults)
    assert METHODS.get("surp").grid.values["k"][:2] == (10.0, 20.0)


def test_all_with_every_capability_keeps_every_method():
    everyone = [m.name for m in METHODS if not m.named_only]  # named_only: run when named
    assert len(everyone) < len(METHODS.names())  # pac at least is left out of "all"
    assert names(resolve_methods("all", EVERY_NEED, capabilities=LOCAL)) == everyone
    assert names(resolve_methods("all", EVERY_NEED, capabilities=None)) == everyone


def test_all_on_a_log_prob_only_backend_skips_with_one_line_each(caplog):
    notices: list[str] = []
    with caplog.at_level(logging.WARNING):
        calls = resolve_methods("all", EVERY_NEED, notices, capabilities=LOG_PROBS_ONLY)
    assert {"minkpp", "surp", "probe", "gapk"}.isdisjoint(names(calls))
    assert {"loss", "mink", "dcpdd", "ref"} <= set(names(calls))
    assert sorted(notices) == [
        "skipping gapk: the backend gives only token log-probabilities, "
        "not the full next-token distribution it reads (H, M2, Lmax)",
        "skipping minkpp: the backend gives only token log-probabilities, "
        "not the full next-token distribution it reads (H, M2)",
        "skipping probe: it needs hidden states of a local model, which this backend does not give",
        "skipping surp: the backend gives only token log-probabilities, "
        "not the full next-token distribution it reads (H, M2)",
    ]
    assert all("\n" not in n and n in caplog.text for n in notices)


def test_a_named_method_the_backend_cannot_serve_is_skipped_not_refused():
    notices: list[str] = []
    calls = resolve_methods("loss,minkpp:k=0.3,probe", EVERY_NEED, notices,
                            capabilities=LOG_PROBS_ONLY)
    assert names(calls) == ["loss"]
    assert [n.split(":")[0] for n in notices] == ["skipping minkpp", "skipping probe"]


def test_skipping_every_named_method_selects_none():
    with pytest.raises(PddkitError, match=r"selects no method.*full next-token distribution"):
        resolve_methods("minkpp", EVERY_NEED, capabilities=LOG_PROBS_ONLY)


def test_only_the_missing_capability_is_named():
    probe = METHODS.get("probe")
    no_hidden = SimpleNamespace(full_distribution=False, hidden_states=False, local_model=True)
    assert unmet(probe, no_hidden) == ("skipping probe: it needs hidden states, "
                                       "which this backend does not give")
    assert unmet(METHODS.get("minkpp"), no_hidden) is not None
    assert unmet(METHODS.get("minkpp"), SimpleNamespace(full_distribution=True)) is None
    assert unmet(METHODS.get("loss"), LOG_PROBS_ONLY) is None
    assert unmet(probe, None) is None


def test_unmet_needs_still_refuse_a_named_method_and_skip_under_all():
    notices: list[str] = []
    calls = resolve_methods("all", {Need.LOWERCASE}, notices, capabilities=LOCAL)
    assert "dcpdd" not in names(calls)
    assert "skipping dcpdd: it needs a frequency table (`freq`)" in notices
    with pytest.raises(PddkitError, match="dcpdd needs a frequency table"):
        resolve_methods("dcpdd", {Need.LOWERCASE}, capabilities=LOCAL)


def test_register_method_refuses_unknown_capabilities_and_foreign_grid_parameters():
    with pytest.raises(ValueError, match="unknown capabilities"):
        register_method("x-test", requires=("gpu",), paper="p", summary="s")
    grid = Grid({"q": (1.0,)}, lambda P, log_freq, q: np.zeros((len(P.n), 1)))
    with pytest.raises(ValueError, match="not its hyperparameters"):
        register_method("x-test", grid=grid, paper="p", summary="s")(lambda obs, *, k=1.0: 0.0)
    assert "x-test" not in METHODS.names()
