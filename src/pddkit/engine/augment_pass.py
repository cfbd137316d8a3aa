"""The provider of Need.AUGMENTATIONS (`pac`): word-swapped copies of every text
(resources/augment.py), each distinct copy scored once by the target model through the
run's executor and statistics cache (the Ray engine and a resumed run serve them like
any other text), and the copies written to augmentations.jsonl beside scores.jsonl."""

from __future__ import annotations

from pddkit.engine.pass_context import PassContext, provider, text_sets_stats
from pddkit.methods.base import Need


@provider(Need.AUGMENTATIONS)
def augment_provider(ctx: PassContext) -> None:
    """Each distinct swap rate among the `pac` calls gets one set of copies per text,
    drawn for its largest n_aug (a call asking for fewer takes the first ones). The
    copies permute the words of the scored span (the whole text unless it was cut to the
    context), the x whose statistics PD(x) reads."""
    from pddkit.resources.augment import AugmentParams, augment, check

    calls = [c for c in ctx.calls if Need.AUGMENTATIONS in c.spec.needs]
    wanted: dict[AugmentParams, int] = {}
    for c in calls:
        check(c.params["n_aug"], c.params["swap"])
        key = AugmentParams.of(c.params)
        wanted[key] = max(wanted.get(key, 0), int(c.params["n_aug"]))
    seed = ctx.config.seed
    sets = {key: [augment(span, n, key.swap, seed) for span in ctx.spans]
            for key, n in wanted.items()}
    fields, n, cut = text_sets_stats(ctx, sets, "an augmented copy of", "augmentation pass")
    ctx.fields["augmented"], ctx.counts["augmented_texts"] = fields, n
    ctx.counts["truncated"]["augmentations"] = cut
    rows = [{"id": ctx.ids[i], "method": c.label,
             "texts": list(sets[AugmentParams.of(c.params)][i][:int(c.params["n_aug"])])}
            for c in calls for i in range(len(ctx.texts))]
    ctx.extras.setdefault("trail", {})["augmentations.jsonl"] = rows
