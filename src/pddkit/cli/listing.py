"""`pddkit list`: methods, baselines and benchmarks."""

from __future__ import annotations

import click

from pddkit.cli import options
from pddkit.cli.app import cli


@cli.command("list", short_help="Methods, baselines, benchmarks and builders.")
def list_cmd() -> None:
    """Methods with their needs and defaults, benchmarks and builders."""
    from pddkit.data import BENCHMARKS
    from pddkit.methods import METHODS

    rows: list = ["methods (needs; extra model work per text; * = only when named, not in `all`):"]
    for m in METHODS:
        needs = ", ".join(sorted(n.value for n in m.needs)) or "target model"
        if m.requires:
            needs += " (" + ", ".join(sorted(r.replace("_", " ") for r in m.requires)) + ")"
        if m.cost != "none":
            needs += f"; {m.cost}"
        params = ",".join(f"{k}={v}" for k, v in m.defaults.items()) or "-"
        rows.append((m.name + ("*" if m.named_only else ""), params, needs,
                     f"{m.paper}: {m.summary}"))
    rows.append("baselines:")
    rows.append(("blind", "folds=5", "labels only",
                 "Das et al. 2024: TF-IDF + bag of words + dates + style, stacked, out-of-fold; "
                 "in every labelled run and as `pddkit blind`"))
    rows.append("benchmarks:")
    for b in BENCHMARKS:
        params = ",".join(f"{k}={v}" for k, v in b.defaults.items()) or "-"
        rows.append((b.name, params, "", b.description))
    from pddkit.data.builders import BUILDERS

    rows.append("builders (pddkit build NAME ... --output DIR):")
    for spec in BUILDERS:  # own lines: their parameters would widen the columns above
        rows.append(f"  {spec.name:<12}{spec.description}")
        needs = [options.FLAGS[k] for k, v in spec.defaults.items() if v in (None, ())]
        given = [f"{options.FLAGS[k]}={_value(v)}" for k, v in spec.defaults.items()
                 if v not in (None, ())]
        rows.append(f"  {'':<12}needs {', '.join(needs)}; defaults {' '.join(given)}")
    from pddkit.studies import STUDIES

    rows.append("studies (pddkit NAME ...):")
    width = max((len(s.name) for s in STUDIES), default=0) + 2  # "traps generate" is 14
    for study in STUDIES:
        rows.append(f"  {study.name:<{width}}{study.description} ({study.paper})")
    cells = [r for r in rows if isinstance(r, tuple)]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]  # aligned columns
    for r in rows:
        if isinstance(r, str):
            click.echo(r)
        else:
            click.echo("  " + "  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])


def _value(v: object) -> str:
    """A builder parameter's default as a flag value: (512, 1024) -> 512,1024."""
    return ",".join(map(str, v)) if isinstance(v, tuple) else str(v)
