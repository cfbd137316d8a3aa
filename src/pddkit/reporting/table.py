"""One table model for every table pddkit shows, and its renderers: aligned plain text
(the terminal), Markdown (report.md) and HTML (report.html). Numbers are formatted here."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MISSING_TEXT = "  -  "  # an undefined number in the terminal: as wide as 0.000, centred
MISSING = "–"  # and in report.md / report.html


def fmt(x: float | None, digits: int = 3, missing: str = MISSING) -> str:
    """A number as the reports show it; None and NaN (an undefined value) as `missing`."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    return f"{x:.{digits}f}"


@dataclass(frozen=True)
class Num:
    """A number cell: `prefix` value [mark] [low, high] `suffix`; the mark of a best cell
    goes right after the value."""

    value: float | None
    ci: tuple[float | None, float | None] | None = None
    digits: int = 3
    prefix: str = ""
    suffix: str = ""

    def render(self, mark: str, missing: str) -> str:
        f = lambda x: fmt(x, self.digits, missing)  # noqa: E731
        ci = "" if self.ci is None else f" [{f(self.ci[0])}, {f(self.ci[1])}]"
        return f"{self.prefix}{f(self.value)}{mark}{ci}{self.suffix}"

    def number(self) -> float:
        """The value for comparisons; NaN when undefined."""
        return math.nan if self.value is None else float(self.value)


Cell = str | Num


@dataclass(frozen=True)
class Table:
    """A titled grid of cells. `best`: (row, column) cells marked with `mark`; `baseline`:
    indices of rows that are baselines, not detection methods (the `blind` row, in italics
    in HTML); `notes`: sentences shown under the table; `id` / `css_class`: HTML attributes."""

    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    title: str = ""
    best: frozenset[tuple[int, int]] = frozenset()
    mark: str = "*"
    baseline: frozenset[int] = frozenset()
    notes: tuple[str, ...] = ()
    id: str = ""
    css_class: str = ""

    def __post_init__(self) -> None:
        if any(len(r) != len(self.header) for r in self.rows):
            raise ValueError(f"table {self.title!r}: every row needs {len(self.header)} cells")

    def cell(self, i: int, j: int, *, pad: bool, missing: str) -> str:
        c = self.rows[i][j]
        marked = (i, j) in self.best
        if isinstance(c, str):
            return c + self.mark if marked else c
        return c.render(self.mark if marked else " " * len(self.mark) if pad else "", missing)


def best_cells(rows: Sequence[Sequence[Cell]], columns: Iterable[int],
               exclude: Iterable[int] = ()) -> frozenset[tuple[int, int]]:
    """Per column, the row with the largest defined Num (rows in `exclude` never win; the
    first row wins a tie; a column without any defined value has no best)."""
    skip = set(exclude)
    out = set()
    for j in columns:
        vals = {i: r[j].number() for i, r in enumerate(rows)
                if i not in skip and isinstance(r[j], Num)}
        vals = {i: v for i, v in vals.items() if not math.isnan(v)}
        if vals:
            out.add((max(vals, key=vals.__getitem__), j))  # max keeps the first of equals
    return frozenset(out)


def to_text(table: Table) -> list[str]:
    """Aligned columns under a dashed rule; the title above, the notes below. Unmarked
    number cells keep the mark's width, so values line up."""
    cells = [list(table.header)] + [
        [table.cell(i, j, pad=True, missing=MISSING_TEXT) for j in range(len(table.header))]
        for i in range(len(table.rows))]
    widths = [max(len(r[j]) for r in cells) for j in range(len(table.header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [*([table.title] if table.title else []), line(cells[0]),
            "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:]), *table.notes]


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> list[str]:
    """A pipe table under a `##` title, the notes as a paragraph below."""
    out = [f"## {table.title}", ""] if table.title else []
    out += ["| " + " | ".join(_md_cell(h) for h in table.header) + " |",
            "|" + "---|" * len(table.header)]
    out += ["| " + " | ".join(_md_cell(table.cell(i, j, pad=False, missing=MISSING))
                              for j in range(len(table.header))) + " |"
            for i in range(len(table.rows))]
    if table.notes:
        out += ["", " ".join(table.notes)]
    return out


def to_html(table: Table) -> str:
    """<h2> title, <table> (best cells class 'best', baseline rows class 'baseline'), notes."""
    e = html.escape
    attrs = (f" id='{e(table.id)}'" if table.id else "") + (
        f" class='{e(table.css_class)}'" if table.css_class else "")
    parts = [f"<h2>{e(table.title)}</h2>"] if table.title else []
    parts.append(f"<table{attrs}><tr>" + "".join(f"<th>{e(h)}</th>" for h in table.header)
                 + "</tr>")
    for i in range(len(table.rows)):
        tds = []
        for j in range(len(table.header)):
            cls = " class='best'" if (i, j) in table.best else ""
            tds.append(f"<td{cls}>{e(table.cell(i, j, pad=False, missing=MISSING))}</td>")
        cls = " class='baseline'" if i in table.baseline else ""
        parts.append(f"<tr{cls}>{''.join(tds)}</tr>")
    parts.append("</table>")
    if table.notes:
        parts.append(f"<p>{e(' '.join(table.notes))}</p>")
    return "\n".join(parts)
