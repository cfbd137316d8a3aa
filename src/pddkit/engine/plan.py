"""Method calls + the resources a run was given -> the passes to run.

A method declares what it needs beyond the target pass (`Need`: a lowercase pass, a
reference model, a frequency table, neighbours, a probe) and which backend capabilities
it reads (`requires`); the plan is the union of the needs of the methods that can run,
computed once, in the order the providers must run (passes.PROVIDERS)."""

from __future__ import annotations

from dataclasses import dataclass

from pddkit.backends.base import Capabilities
from pddkit.data.samples import Dataset
from pddkit.engine.config import RunConfig
from pddkit.methods.base import MethodCall, Need, resolve_methods


@dataclass(frozen=True)
class Resources:
    """What the run was given besides the target model: each resource enables a Need."""

    reference: bool = False
    frequency: bool = False
    neighbors: bool = False
    probe: bool = False
    shots: bool = False  # labelled shots: `prefix_data`, or labelled data to draw them from
    calibration: bool = False  # `calibration`, or labelled data to hold 30% out of (SPEC 3e)
    quiz: bool = False  # decop's paraphrases: `paraphrases` or `paraphraser`

    @classmethod
    def of(cls, config: RunConfig, ref_model_given: bool = False,
           dataset: Dataset | None = None) -> Resources:
        """`dataset`: neighbours it carries (meta "neighbors") enable `neighbor` too."""
        given = dataset is not None and bool(dataset.meta.get("neighbors"))
        return cls(reference=bool(config.ref_model) or ref_model_given,
                   frequency=bool(config.freq),
                   neighbors=bool(config.mask_model or config.neighbors_file or given
                                  or "neighbor" in config.methods),
                   probe=bool(config.probe_data or config.probe_load),
                   shots=bool(config.prefix_data) or (dataset is not None and dataset.labelled),
                   calibration=bool(config.calibration) or (dataset is not None and dataset.labelled),
                   quiz=bool(config.paraphrases or config.paraphraser))

    def available(self) -> set[Need]:
        out = {Need.LOWERCASE, Need.AUGMENTATIONS, Need.SAMPLES, Need.INFILL, Need.FINETUNED,
               Need.REPEATED, Need.PAIRS}
        for need, given in ((Need.REFERENCE, self.reference), (Need.FREQUENCY, self.frequency),
                            (Need.NEIGHBORS, self.neighbors), (Need.PROBE, self.probe),
                            (Need.SHOTS, self.shots), (Need.CALIBRATION, self.calibration),
                            (Need.QUIZ, self.quiz)):
            if given:
                out.add(need)
        return out


@dataclass(frozen=True)
class Plan:
    """The method calls that will run and the union of their needs."""

    calls: tuple[MethodCall, ...]
    needs: frozenset[Need]

    def passes(self) -> list[Need]:
        """The needs in the order their providers run (the target pass always runs first)."""
        return [n for n in Need if n in self.needs]


def make_plan(methods: str, resources: Resources, capabilities: Capabilities | None = None,
              notices: list[str] | None = None, language: str | None = None) -> Plan:
    """`methods` ("all" or "loss,mink:k=0.1") -> Plan. Methods whose needs the resources do
    not meet are skipped under "all" and refused when named; methods reading what the
    backend cannot give, or what the data set's `language` lacks (letter case), are
    skipped with a notice naming the reason."""
    calls = resolve_methods(methods, resources.available(), notices, capabilities=capabilities,
                            language=language)
    for call in calls:
        check_params(call)
    return Plan(tuple(calls), frozenset().union(*(c.needs for c in calls)))


def needs_of(methods: str) -> frozenset[Need]:
    """What `methods` would need were every resource given (a caller holding resources of
    its own, as the sandbox does, gives each only to the methods that use it)."""
    return make_plan(methods, Resources(True, True, True, True, True, True, True)).needs


# the options that give a resource, and the need it meets
_RESOURCE_OPTIONS = (("ref_model", Need.REFERENCE), ("freq", Need.FREQUENCY),
                     ("mask_model", Need.NEIGHBORS), ("neighbors_file", Need.NEIGHBORS),
                     ("probe_data", Need.PROBE), ("probe_load", Need.PROBE),
                     ("prefix_data", Need.SHOTS), ("calibration", Need.CALIBRATION),
                     ("paraphrases", Need.QUIZ), ("paraphraser", Need.QUIZ))


def unused_resources(config: RunConfig, plan: Plan) -> list[str]:
    """One notice per resource option given that no method of the plan needs (a model or
    file the run would otherwise silently ignore)."""
    labels = ", ".join(c.label for c in plan.calls) or "none"
    return [f"`{name}` is given but no method of this run ({labels}) needs "
            f"{need.with_article}: it is not used"
            for name, need in _RESOURCE_OPTIONS
            if getattr(config, name) and need not in plan.needs]


def check_params(call: MethodCall) -> None:
    """A method's hyperparameters, tried on a small made-up observation before any model
    loads: a value the method refuses (mink:k=2) is one sentence now, not after the
    forward pass (a method raises PddkitError for a bad value)."""
    import numpy as np

    from pddkit.errors import PddkitError
    from pddkit.stats import Observation, TokenStats

    st = TokenStats.from_lists([5, 7, 5, 9, 11, 7, 13, 2], [-1.0, -2.5, -0.5, -3.0, -1.5, -2.0, -0.2, -4.0],
                               [1.0, 2.0, 0.5, 3.0, 1.5, 2.5, 0.1, 3.5],
                               [2.0, 6.0, 0.5, 12.0, 3.0, 8.0, 0.05, 15.0],
                               Lmax=[-0.5, -1.0, -0.2, -1.0, -0.5, -1.0, -0.05, -1.5],
                               tempered=np.zeros((2, 52)))
    obs = Observation(text="a made up text of eight words here", target=st, lower=st,
                      reference=st, log_freq=np.full(16, -5.0), neighbors=(st, st, st), probe=0.0,
                      conditioned=_Every(st), augmented=(st, st, st), samples=("a made up", "text"),
                      infill=((1, st), (3, st)), finetuned=_Every(st), repeated=st,
                      emmia=_Every(0.0), quiz=_Every(("A", (0.25, 0.25, 0.25, 0.25))))
    try:
        if Need.CALIBRATION in call.needs and call.spec.calibration is not None:  # SPEC 3e
            fit = call.spec.calibration.fit([obs, obs], np.array([1, 0]), **call.params)
            call = MethodCall(call.spec, fit.params, call.label)
        call(obs)
    except PddkitError as e:
        raise PddkitError(f"method {call.label}: {e}") from None


class _Every(dict):
    """A mapping that holds `value` under every key (check_params' made-up observation)."""

    def __init__(self, value) -> None:
        super().__init__()
        self.value = value

    def __missing__(self, key):
        return self.value
