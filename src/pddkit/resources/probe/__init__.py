"""The white-box probe (Liu et al. 2024): features (prompt, last-token activations),
training (proxy fine-tuning, the auxiliary split, one probe per layer) and the estimator
(LinearProbe, its grid, its scores on the texts under test)."""

from pddkit.resources.probe.estimator import LinearProbe, ProbeSearch, probe_scores
from pddkit.resources.probe.features import (
    EPS,
    PROMPT,
    STANDARDIZE,
    activations,
    encode_prompts,
    standardize_set,
)
from pddkit.resources.probe.training import MIN_ROWS, fine_tune_proxy, split_auxiliary, train_probes

__all__ = ["EPS", "MIN_ROWS", "PROMPT", "STANDARDIZE", "LinearProbe", "ProbeSearch", "activations",
           "encode_prompts", "fine_tune_proxy", "probe_scores", "split_auxiliary",
           "standardize_set", "train_probes"]
