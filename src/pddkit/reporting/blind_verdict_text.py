"""The blind baseline's verdict (blind/verdict.py's BlindVerdict) as the sentence results.json
(`blind_baseline.message`), the terminal and the report show, and the rule that makes it a
warning, as the sandbox summary states it."""

from __future__ import annotations

from pddkit.blind.verdict import ALPHA, MIN_AUC, SMALL_SHIFT, WARN, BlindVerdict

RULE = (f"a warning is raised when its AUC is above chance for the number of texts "
        f"(p < {ALPHA}) and at least {MIN_AUC:.2f}")
# the verdict's interval, named wherever it is printed beside the metrics table's bootstrap CI
INTERVAL_LABEL = "95% interval allowing for the classifier's refitting on every fold"


def blind_sentence(v: BlindVerdict) -> str:
    """The verdict in one sentence: the AUC on how many members and non-members, its
    interval, and what the outcome means for the other AUCs."""
    head = (f"The blind baseline (no model, text features only) reaches AUC {v.auc:.3f} "
            f"on {v.n_members} member and {v.n_nonmembers} non-member {v.unit} "
            f"({INTERVAL_LABEL} [{v.low:.3f}, {v.high:.3f}])")
    if v.sample:
        head += (f" (fitted on a stratified sample of {v.sample['texts']:,} of the "
                 f"{v.sample['of']:,} texts: out-of-fold there, the "
                 "others scored by a model fitted on the whole sample)")
    if v.outcome == WARN:
        return (f"Warning: {head[0].lower()}{head[1:]}: above chance (p = {_p(v.p)}): "
                "members and non-members differ without the model (a distribution "
                "shift in what the texts say or how they are written), so the other AUCs "
                "here prove little.")
    if v.outcome == SMALL_SHIFT:
        return (f"{head}: above chance (p = {_p(v.p)}) but below {MIN_AUC:.2f}: a small "
                "shift between members and non-members; detection AUCs well above it "
                "still mean something.")
    return (f"{head}: not above chance (p = {_p(v.p)}): this baseline found no shift "
            "between members and non-members; a stronger classifier might.")


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"
