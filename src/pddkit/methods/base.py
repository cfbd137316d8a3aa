"""Method registry: a method is a pure function `fn(obs, *, hyper=default) -> float`.

Higher score = more likely a member. A method declares the inputs it
needs beyond the target model's statistics; the engine computes the union of all needs
once. A method whose formula has a fallback (surp's empty token set, a neighbour set
smaller than asked) declares a second pure function with the same hyperparameters,
`fallback(obs, *, hyper=default) -> str | None`: None when the text was scored by the
formula itself, else a clause saying what happened and what the score is instead. The
engine counts the clauses and reports each as a notice with the share of texts affected
(`fallback_line`); nothing is recorded as a side effect of scoring.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from pddkit.errors import PddkitError
from pddkit.methods.grid import Grid
from pddkit.params import bind_params, parse_spec, split_spec_list
from pddkit.registry import Registry
from pddkit.stats import OPTIONAL_FIELDS, Observation

logger = logging.getLogger(__name__)


class Need(str, Enum):
    """What a method needs beyond the target model's L, H, M2."""

    LOWERCASE = "lowercase pass"  # a second target pass over text.lower()
    REFERENCE = "reference model"  # ref_model
    FREQUENCY = "frequency table"  # freq
    NEIGHBORS = "masked LM for neighbours"  # mask_model (neighbor)
    PROBE = "probe"  # probe_data or probe_load
    SHOTS = "labelled shots"  # prefix_data, or shots drawn from the labelled data (SPEC 3b)
    AUGMENTATIONS = "augmented texts"  # pac: word-swapped copies, in the statistics pass
    SAMPLES = "sampled continuations"  # samia: the backend samples continuations
    INFILL = "infilling passes"  # infill: one pass per position whose token is not the argmax
    # labelled texts a method fits on and that are never evaluated (SPEC 3e): `calibration`,
    # or a seeded stratified 30% held out of the labelled data (engine/calibration_pass.py)
    CALIBRATION = "labelled calibration data"
    # fsd: the target with a LoRA adapter tuned on the calibration non-members (engine/fsd_pass.py)
    FINETUNED = "fine-tuned model"
    REPEATED = "repeated-text pass"  # camia: x followed by five copies, in the target model
    # emmia: each text given every other text as its prefix, N x N conditional passes
    # (engine/emmia_pass.py); needs nothing given, but is capped by the method's max_texts
    PAIRS = "every text given every other"
    # decop: each text's multiple-choice items (the text among 3 paraphrases) answered by the
    # target (engine/decop_pass.py); paraphrases from `paraphrases` or a `paraphraser`
    QUIZ = "multiple-choice quiz"

    @property
    def with_article(self) -> str:
        """"a reference model", "labelled shots" (plural needs take no article)."""
        plural = {"labelled shots", "augmented texts", "sampled continuations", "infilling passes",
                  "labelled calibration data", "every text given every other"}
        if self.value == "multiple-choice quiz":
            return "a multiple-choice quiz (3 paraphrases per text)"
        return self.value if self.value in plural else f"a {self.value}"

    @property
    def parameter(self) -> str:
        """The parameter(s) that meet this need, as messages name them (the CLI shows flags)."""
        return {"lowercase pass": "", "reference model": "`ref_model`",
                "frequency table": "`freq`", "masked LM for neighbours": "`mask_model`",
                "probe": "`probe_data` or `probe_load`",
                "labelled shots": "`prefix_data` (or labelled data to draw them from)",
                "augmented texts": "", "sampled continuations": "",
                "infilling passes": "",
                "labelled calibration data": "`calibration` (a labelled table; or labelled "
                                             "data to hold 30% out of)",
                "fine-tuned model": "", "repeated-text pass": "",
                "every text given every other": "",
                "multiple-choice quiz": "`paraphrases` (a file of 3 paraphrases per text) or "
                                        "`paraphraser` (a model to write them)"}[self.value]


# what a backend must give for a method that `requires` it: backends.base.Capabilities
# field names, as plain strings so that methods never import backends
REQUIREMENTS = {
    "full_distribution": "the full next-token distribution (H, M2)",
    "hidden_states": "hidden states",
    "local_model": "a local model",
    "sampling": "sampled continuations",
    "first_token": "the log-probability of a text's first token",
}

# what the texts' script must have for a method that `text_requires` it, whatever the backend
TEXT_REQUIREMENTS = {
    "letter_case": "letter case",
}

# languages (ISO 639-1 codes) written in scripts without upper and lower case (Han, kana,
# Hangul, Thai, Arabic, Hebrew, the Indic scripts, Ethiopic, Georgian, Tibetan, ...; not
# Kurdish, often Latin); a script subtag (ISO 15924) decides first: "zh-Latn" (pinyin) is cased
CASELESS_LANGUAGES = frozenset({
    "zh", "ja", "ko", "th", "lo", "km", "my", "bo", "dz", "ar", "fa", "ur", "ps", "ug", "sd",
    "he", "yi", "hi", "mr", "ne", "sa", "bn", "as", "pa", "gu", "or", "ta", "te", "kn", "ml", "si",
    "dv", "am", "ti", "ka"})
CASED_SCRIPTS = frozenset({"latn", "cyrl", "grek", "armn", "copt", "glag", "dsrt", "adlm"})


def has_letter_case(language: str) -> bool:
    """Whether texts in `language` ("en", "zh", "zh-Hans", "sr_Cyrl") have upper and lower
    case; an unknown language counts as cased (nothing is skipped for it)."""
    parts = language.strip().lower().replace("_", "-").split("-")
    script = next((p for p in parts[1:] if len(p) == 4 and p.isalpha()), None)
    if script is not None:
        return script in CASED_SCRIPTS
    return parts[0] not in CASELESS_LANGUAGES


def unmet_text(spec: MethodSpec, language: str | None) -> str | None:
    """The one-line notice for a method meaningless in the data set's `language`, or None
    (None also when no language is declared)."""
    if language is None or "letter_case" not in spec.text_requires or has_letter_case(language):
        return None
    return (f"skipping {spec.name}: it compares each text with its lower-cased form, and "
            f"`language` {language} is written without letter case")


@dataclass(frozen=True)
class Calibrated:
    """What a method fitted on the calibration texts: the hyperparameters it scores the
    evaluated texts with (its own, the fitted ones filled in), and what results.json
    records of the fit (the value chosen, its calibration AUC)."""

    params: dict
    record: dict


@dataclass(frozen=True)
class Calibration:
    """How a method fits on labelled calibration texts (SPEC 3e), never on texts under test.
    `fit(observations, labels, **params) -> Calibrated` with labels an [N] int array (1 =
    member); `needed(params) -> bool`: whether these hyperparameters leave something to fit
    (acmia with `beta` given does not: it then needs no calibration data)."""

    fit: Callable[..., Calibrated]
    needed: Callable[[dict], bool] = lambda params: True
    instead: str = ""  # what else meets the need, for the message refusing a run without it


@dataclass(frozen=True)
class MethodSpec:
    name: str
    fn: Callable[..., float]
    needs: frozenset[Need]
    defaults: dict
    paper: str
    summary: str
    requires: frozenset[str] = frozenset()  # backend capabilities the method reads
    grid: Grid | None = None  # every text x every hyperparameter value, for validation
    text_requires: frozenset[str] = frozenset()  # what the script must have (TEXT_REQUIREMENTS)
    fallback: Callable[..., str | None] | None = None  # the module docstring
    cost: str = "none"  # model work per text beyond the target pass, as `pddkit list` shows it
    named_only: bool = False  # not part of "all": runs only when named (costly, or leaves texts out)
    reads_target: bool = True  # False: never reads obs.target (only such methods: no target pass)
    reads: frozenset[str] = frozenset()  # optional target fields it reads (stats.OPTIONAL_FIELDS)
    calibration: Calibration | None = None  # fitted on labelled calibration texts (SPEC 3e)
    # reads_with(params): optional target fields read with these hyperparameters beyond
    # `reads` (fsd:base=gapk reads gapk's Lmax)
    reads_with: Callable[[dict], frozenset[str]] | None = None


@dataclass(frozen=True)
class MethodCall:
    """A method with bound hyperparameters; `label` names its score column."""

    spec: MethodSpec
    params: dict = field(default_factory=dict)
    label: str = ""

    def __call__(self, obs: Observation) -> float:
        return float(self.spec.fn(obs, **self.params))

    @property
    def needs(self) -> frozenset[Need]:
        """The method's needs with these hyperparameters: calibration data only where they
        leave something to fit (Calibration.needed)."""
        cal = self.spec.calibration
        if cal is not None and cal.needed(self.params):
            return self.spec.needs | {Need.CALIBRATION}
        return self.spec.needs

    @property
    def reads(self) -> frozenset[str]:
        """The optional target fields this call reads: its method's `reads`, and those its
        hyperparameters add (`reads_with`: the base method of fsd)."""
        extra = self.spec.reads_with
        return self.spec.reads | (frozenset() if extra is None else extra(self.params))

    def fallback(self, obs: Observation) -> str | None:
        """The clause naming the fallback `obs` was scored by, or None (the formula itself)."""
        return None if self.spec.fallback is None else self.spec.fallback(obs, **self.params)


def fallback_line(label: str, reason: str, n: int, total: int) -> str:
    """One notice: how many texts, and what share, a method scored by a fallback."""
    return f"{label}: {n} of {total} texts ({n / max(total, 1):.0%}) {reason}"


def every_text_line(label: str, total: int) -> str:
    """The notice for a method that scored every text by a fallback: its scores (and its
    row of metrics) measure the fallback, not the method's formula."""
    return (f"{label}: all {total} texts were scored by a fallback (the notices above say "
            f"which), none by {label}'s formula as written: its scores and metrics measure the "
            "fallback")


METHODS: Registry[MethodSpec] = Registry("method")


def register_method(name: str, *, needs: tuple[Need, ...] = (), requires: tuple[str, ...] = (),
                    text_requires: tuple[str, ...] = (), grid: Grid | None = None, paper: str,
                    summary: str, fallback: Callable[..., str | None] | None = None,
                    cost: str = "none", named_only: bool = False, reads_target: bool = True,
                    reads: tuple[str, ...] = (), calibration: Calibration | None = None,
                    reads_with: Callable[[dict], frozenset[str]] | None = None):
    """Decorator: register `fn(obs, *, hyper=default) -> float` under `name`. `requires`
    names the backend capabilities it reads (REQUIREMENTS keys), `text_requires` what the
    texts' script must have (TEXT_REQUIREMENTS keys: a data set declaring a `language`
    without it skips the method); `grid` scores every text at every value of some of its
    hyperparameters at once, for validation; `fallback` says which texts a fallback of the
    formula scored (module docstring), with the method's own hyperparameters; `cost` says
    what model work a text costs beyond the target pass (`pddkit list`); a `named_only`
    method is not part of "all" (it runs when named); a method with `reads_target=False`
    never reads the target statistics (`samia`: sampled texts only), so a plan of only such
    methods skips the target pass and its Observation.target is an empty TokenStats;
    `reads` names the optional TokenStats fields it reads from obs.target (Lmax: `gapk`),
    which the target pass asks the statistics cache for (an entry stored without one is a
    miss for such a run only); `calibration` fits some of its hyperparameters on labelled
    calibration texts before the evaluated texts are scored (Calibration); `reads_with(params)`
    names optional fields read with given hyperparameters beyond `reads` (fsd's base)."""
    unknown = (set(requires) - set(REQUIREMENTS)) | (set(text_requires) - set(TEXT_REQUIREMENTS))
    if unknown:
        raise ValueError(f"method {name} requires unknown capabilities {sorted(unknown)}")
    if not set(reads) <= set(OPTIONAL_FIELDS):
        unread = sorted(set(reads) - set(OPTIONAL_FIELDS))
        raise ValueError(f"method {name} reads unknown statistics {unread}")

    def deco(fn: Callable[..., float]) -> Callable[..., float]:
        sig = inspect.signature(fn)
        defaults = {k: p.default for k, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}
        if grid is not None and not set(grid.values) <= set(defaults):
            raise ValueError(f"method {name}: grid parameters {sorted(set(grid.values) - set(defaults))} "
                             "are not its hyperparameters")
        if fallback is not None:
            theirs = {k: p.default for k, p in inspect.signature(fallback).parameters.items()
                      if p.kind is p.KEYWORD_ONLY}
            if theirs != defaults:
                raise ValueError(f"method {name}: its fallback takes {theirs}, not its "
                                 f"hyperparameters {defaults}")
        METHODS.add(name, MethodSpec(name, fn, frozenset(needs), defaults, paper, summary,
                                     frozenset(requires), grid, frozenset(text_requires),
                                     fallback, cost, named_only, reads_target, frozenset(reads),
                                     calibration, reads_with))
        return fn

    return deco


def unmet(spec: MethodSpec, capabilities) -> str | None:
    """The one-line notice for a method the backend cannot serve, or None. `capabilities`:
    an object with boolean attributes named as REQUIREMENTS (one it lacks counts as
    given); None = everything is given."""
    if capabilities is None:
        return None
    if spec.reads_target and not getattr(capabilities, "prompt_logprobs", True):
        return (f"skipping {spec.name}: the server returns no log-probabilities of the text's "
                "tokens (only methods reading sampled continuations, such as samia, can run on it)")
    missing = [r for r in REQUIREMENTS if r in spec.requires and not getattr(capabilities, r, True)]
    if not missing:
        return None
    if missing == ["full_distribution"]:
        reads = ", ".join(["H", "M2", *sorted(spec.reads)])
        return (f"skipping {spec.name}: the backend gives only token log-probabilities, "
                f"not the full next-token distribution it reads ({reads})")
    what = " and ".join(REQUIREMENTS[m] for m in missing).replace(
        "hidden states and a local model", "hidden states of a local model")
    return f"skipping {spec.name}: it needs {what}, which this backend does not give"


def resolve_methods(text: str, available: set[Need], notices: list[str] | None = None,
                    capabilities=None, language: str | None = None) -> list[MethodCall]:
    """`"all"` or `"loss,mink:k=0.1"` -> MethodCalls.

    `all` keeps the methods whose needs `available` meets and logs one line per method
    skipped (also appended to `notices`); a method named explicitly with an unmet need is
    an error. A method reading what the backend cannot give (`capabilities`, see `unmet`)
    is skipped with a notice, named or not: never approximated; so is a method meaningless
    for the data set's `language` (`unmet_text`: `lowercase` on Chinese). Selecting
    nothing is an error.
    """
    calls: list[MethodCall] = []
    skipped: list[str] = []

    def skip(line: str) -> None:
        logger.warning(line)
        skipped.append(line)
        if notices is not None:
            notices.append(line)

    for spec_text in split_spec_list(text):
        name, raw = parse_spec(spec_text)
        if name == "all":
            if raw:
                raise PddkitError("'all' takes no parameters")
            for spec in METHODS:
                missing = MethodCall(spec, dict(spec.defaults)).needs - available
                if spec.named_only:
                    continue  # runs only when named (pddkit list marks it)
                if missing:
                    need = sorted(missing)[0]
                    skip(f"skipping {spec.name}: it needs {need.with_article} ({need.parameter})")
                elif unmet(spec, capabilities):
                    skip(unmet(spec, capabilities))
                elif unmet_text(spec, language):
                    skip(unmet_text(spec, language))
                else:
                    calls.append(MethodCall(spec, dict(spec.defaults)))
            continue
        spec = METHODS.get(name)
        params = bind_params(f"method {name}", spec.defaults, raw)
        why = unmet(spec, capabilities) or unmet_text(spec, language)
        if why:
            skip(why)
            continue
        missing = MethodCall(spec, params).needs - available
        if missing:
            need = sorted(missing)[0]
            other = spec.calibration.instead if (need is Need.CALIBRATION
                                                 and spec.calibration) else ""
            raise PddkitError(f"method {name} needs {need.with_article}: pass {need.parameter}"
                              + (f", or {other}" if other else ""))
        calls.append(MethodCall(spec, params))
    if not calls:
        if capabilities is not None and not getattr(capabilities, "prompt_logprobs", True):
            runnable = sorted(s.name for s in METHODS if not s.reads_target)
            raise PddkitError(f"`methods` {text!r} selects no method this server can run: it "
                              "returns no log-probabilities of the text's tokens, so only "
                              f"{', '.join(runnable)} can run on it")
        why = f" ({skipped[-1]})" if len(skipped) == 1 else ""
        raise PddkitError(f"`methods` {text!r} selects no method{why}")
    return _label(calls)


def _label(calls: list[MethodCall]) -> list[MethodCall]:
    """Column name: the method name, or name:k=v,... when a name occurs more than once
    (a parameter left at None, such as what a calibrated method fits, is not named)."""
    counts: dict[str, int] = {}
    for c in calls:
        counts[c.spec.name] = counts.get(c.spec.name, 0) + 1
    out, seen = [], set()
    for c in calls:
        label = c.spec.name
        if counts[label] > 1:
            label += ":" + ",".join(f"{k}={v}" for k, v in c.params.items() if v is not None)
        if label in seen:
            continue  # the same method asked for twice with the same values
        seen.add(label)
        out.append(MethodCall(c.spec, c.params, label))
    return out


def n_lowest(k: float, n: int) -> int:
    """m = max(1, floor(k * n)) of Min-K% and Min-K%++."""
    if not 0 < k <= 1:
        raise PddkitError(f"k must be in (0, 1], not {k}")
    return max(1, math.floor(k * n))
