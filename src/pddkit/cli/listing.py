"""`pddkit list [NAME]`: methods, baselines, benchmarks, builders and studies, within 100
columns; `pddkit list NAME` shows one of them: a method's page (its documentation page
of the checkout, docs/methods/NAME.md, rendered as text, under what the code says of it:
defaults, validation grid, needs, cost, paper), or a benchmark's, builder's or study's
entry."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import click

from pddkit.cli import flag_table
from pddkit.cli.app import cli
from pddkit.errors import PddkitError

WIDTH = 100  # every line `pddkit list` prints fits in this many columns
INDENT = 19  # names (the longest: copyright-traps, 15) and two spaces either side


@cli.command("list", short_help="Methods, baselines, benchmarks, builders; one in full.")
@click.argument("name", nargs=-1, metavar="[NAME]")
def list_cmd(name) -> None:
    """Methods with their needs and defaults, the blind baseline, benchmarks, builders and
    studies; NAME (a method, benchmark, builder or study: `mink`, `wikimia`, `traps
    detect`) shows that one in full: for a method, its page (formula, defaults, needs,
    cost, paper, reference code)."""
    click.echo("\n".join(entry(" ".join(name)) if name else overview()))


def _wrapped(head: str, text: str, indent: int = INDENT) -> list[str]:
    """`head` in the first `indent` columns, `text` wrapped after it within WIDTH."""
    lines = textwrap.wrap(text, WIDTH - indent, break_on_hyphens=False) or [""]
    first = f"{head:<{indent}}" if len(head) < indent else head + "\n" + " " * indent
    return [(first if i == 0 else " " * indent) + line for i, line in enumerate(lines)]


def _needs(m) -> str:
    """A method's needs, backend requirements and extra model work, in words."""
    needs = ", ".join(sorted(n.value for n in m.needs)) or "target model"
    if m.requires:
        needs += " (" + ", ".join(sorted(r.replace("_", " ") for r in m.requires)) + ")"
    if m.calibration is not None:  # with its defaults; a value given may need none (acmia's beta)
        needs += "; labelled calibration data (--calibration, or 30% held out) to fit its defaults"
    if m.cost != "none":
        needs += f"; {m.cost}"
    return needs


def _defaults(defaults: dict) -> str:
    """k=v,k=v: as NAME:k=v,... of --methods and --benchmark spells them."""
    return ",".join(f"{k}={v}" for k, v in defaults.items()) or "none"


def overview() -> list[str]:
    """Every method, baseline, benchmark, builder and study, two or more lines each."""
    from pddkit.data import BENCHMARKS
    from pddkit.data.builders import BUILDERS
    from pddkit.methods import METHODS

    out = ["methods (* = only when named, not in `all`; `pddkit list NAME` shows one in full):"]
    for m in METHODS:
        out += _wrapped(f"  {m.name}{'*' if m.named_only else ''}", f"{m.paper}: {m.summary}")
        out += _wrapped("", f"defaults: {_defaults(m.defaults)}; needs: {_needs(m)}")
    out.append("baselines:")
    out += _wrapped("  blind", "Das et al. 2024: TF-IDF + bag of words + dates + style, stacked, "
                    "out-of-fold; in every labelled run and as `pddkit blind`")
    out += _wrapped("", "defaults: folds=5; needs: labels only")
    out.append("benchmarks (--benchmark NAME[:k=v,...]):")
    for b in BENCHMARKS:
        out += _wrapped(f"  {b.name}", b.description)
        out += _wrapped("", f"defaults: {_defaults(b.defaults)}")
    out.append("builders (pddkit build NAME ... --output DIR):")
    for spec in BUILDERS:
        out += _wrapped(f"  {spec.name}", spec.description)
        out += _wrapped("", _builder_flags(spec))
    out.append("studies (pddkit NAME ...):")
    for study in _studies():
        out += _wrapped(f"  {study.name}", f"{study.description} ({study.paper})")
    return out


STEPS = ("generate", "inject", "detect")  # a study's steps in the order they are used


def _studies() -> list:
    """The studies, the steps of one (traps) in the order they are used."""
    from pddkit.studies import STUDIES

    def order(study) -> tuple:
        first, _, step = study.name.partition(" ")
        return first, STEPS.index(step) if step in STEPS else len(STEPS), step

    return sorted(STUDIES, key=order)


def _builder_flags(spec) -> str:
    needs = [flag_table.FLAGS[k] for k, v in spec.defaults.items() if v in (None, ())]
    given = [f"{flag_table.FLAGS[k]}={_value(v)}" for k, v in spec.defaults.items()
             if v not in (None, ())]
    return f"needs {', '.join(needs) or 'nothing'}; defaults {' '.join(given) or 'none'}"


def entry(name: str) -> list[str]:
    """One method's page, or one benchmark's, builder's or study's entry; an unknown name
    is one sentence with the nearest known names."""
    import difflib

    from pddkit.data import BENCHMARKS
    from pddkit.data.builders import BUILDERS
    from pddkit.methods import METHODS
    from pddkit.studies import STUDIES

    key = name.strip().casefold()
    for registry, show in ((METHODS, method_page), (BENCHMARKS, _benchmark),
                           (BUILDERS, _builder), (STUDIES, _study)):
        if key in registry.names():
            return show(registry.get(key))
    studies = [s for s in _studies() if s.name.split()[0] == key]  # "traps": its three steps
    if studies:
        return [line for s in studies for line in _study(s)]
    if key == "blind":
        return _wrapped("blind", "the model-free blind baseline (Das et al. 2024): "
                        "TF-IDF + bag of words + dates + style, stacked, out-of-fold, in every "
                        "labelled run and as `pddkit blind`; see docs/guides/blind-baseline.md",
                        indent=8)
    known = [*METHODS.names(), "blind", *BENCHMARKS.names(), *BUILDERS.names(), *STUDIES.names()]
    near = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    raise PddkitError(f"`pddkit list` knows no method, benchmark, builder or study {name!r}"
                      f"{hint} (`pddkit list` without a name lists them all)")


def method_page(m) -> list[str]:
    """What the code says of method `m`, then its documentation page rendered as text."""
    out = [f"{m.name}: {m.paper}"]
    facts = [("formula", m.summary), ("defaults", _defaults(m.defaults))]
    if m.grid is not None:
        facts.append(("validation", "with --val-fraction / --val-data, chosen from " + "; ".join(
            f"{k} in {_span(v)}" for k, v in m.grid.values.items())))
    facts += [("needs", _needs(m)),
              ("in `all`", "no: runs only when named" if m.named_only else "yes")]
    for head, text in facts:
        out += _wrapped(f"  {head}", text, indent=14)
    page = page_path(m.name)
    if page is None:
        out.append("")
        out += textwrap.wrap(f"Its full page (score, parameters, needs, cost, paper, reference "
                             f"code) is docs/methods/{m.name}.md of pddkit's repository, and "
                             "the documentation site's Methods section.", WIDTH)
        return out
    out += ["", *render_markdown(page.read_text(encoding="utf-8"))]
    return out


def _span(values: tuple) -> str:
    """A grid's values in words: "0.05, 0.1, ..., 1.0 (20 values)" or all of them."""
    shown = [_value(v) for v in values]
    if len(shown) <= 6:
        return ", ".join(shown)
    return f"{shown[0]}, {shown[1]}, ..., {shown[-1]} ({len(shown)} values)"


def page_path(name: str) -> Path | None:
    """docs/methods/NAME.md of the checkout pddkit runs from (pip install -e), if there."""
    import pddkit

    page = Path(pddkit.__file__).resolve().parents[2] / "docs" / "methods" / f"{name}.md"
    return page if page.is_file() else None


_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def render_markdown(text: str) -> list[str]:
    """A documentation page as terminal text within WIDTH: headings underlined, links as
    their words, paragraphs and list items wrapped, code blocks and tables as they are
    (cut with "…" where wider)."""
    out: list[str] = []
    para: list[str] = []
    bullet = ""

    def flush() -> None:
        nonlocal bullet
        if para:
            words = _LINK.sub(r"\1", " ".join(para))
            pad = " " * len(bullet)
            out.extend(textwrap.wrap(words, WIDTH, initial_indent=bullet, subsequent_indent=pad,
                                     break_on_hyphens=False, break_long_words=False))
            para.clear()
        bullet = ""

    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced or line.startswith("|"):
            flush()
            shown = "    " + line if fenced else line
            out.append(shown if len(shown) <= WIDTH else shown[:WIDTH - 1] + "…")
            continue
        stripped = line.strip()
        if not stripped:
            flush()
            if out and out[-1] != "":
                out.append("")
            continue
        heading = re.match(r"(#+)\s+(.*)", stripped)
        if heading:
            flush()
            title = _LINK.sub(r"\1", heading.group(2))
            out += [title, ("=" if len(heading.group(1)) == 1 else "-") * min(len(title), WIDTH)]
            continue
        item = re.match(r"([-*]|\d+\.)\s+(.*)", stripped)
        if item:
            flush()
            bullet = item.group(1) + " "
            para.append(item.group(2))
            continue
        para.append(stripped)
    flush()
    while out and out[-1] == "":
        out.pop()
    return out


def _benchmark(b) -> list[str]:
    return [*_wrapped(b.name, b.description, indent=len(b.name) + 2),
            *_wrapped("  defaults", _defaults(b.defaults), indent=14),
            *_wrapped("  use", f"pddkit run --benchmark {b.name}[:k=v,...] (docs/guides/"
                      "benchmarks.md)", indent=14)]


def _builder(spec) -> list[str]:
    return [*_wrapped(spec.name, spec.description, indent=len(spec.name) + 2),
            *_wrapped("  flags", _builder_flags(spec), indent=14),
            *_wrapped("  use", f"pddkit build {spec.name} ... --output DIR (docs/guides/"
                      "benchmarks.md)", indent=14)]


def _study(study) -> list[str]:
    return [*_wrapped(study.name, study.description, indent=len(study.name) + 2),
            *_wrapped("  paper", study.paper, indent=14),
            *_wrapped("  use", f"pddkit {study.name} --help", indent=14)]


def _value(v: object) -> str:
    """A default as a flag value: (512, 1024) -> 512,1024."""
    return ",".join(map(str, v)) if isinstance(v, tuple) else str(v)
