"""ArxivMIA (Liu et al. 2024, "Probing language models for pre-training data
detection"): arXiv titles and abstracts in computer science and mathematics; label 1 =
papers before the model's training cutoff, 0 = after. The release's files are
`arxiv_mia.jsonl` (all 2,000), `arxiv_mia_dev.jsonl` (400) and `arxiv_mia_test.jsonl`
(1,600), rows `{"text", "label", "field"}`; `subset` = field."""

from __future__ import annotations

from pathlib import Path

from pddkit.data.benchmarks.files import choose, jsonl_values, tagged
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.hub import hub_file
from pddkit.data.records import rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

REPO = "zhliu/ArxivMIA"
FILES = {"all": "arxiv_mia.jsonl", "dev": "arxiv_mia_dev.jsonl", "test": "arxiv_mia_test.jsonl"}
FIELDS = ("all", "cs", "math")


@register_benchmark("arxivmia", "ArxivMIA (Liu et al. 2024): arXiv abstracts before vs after the "
                    "cutoff; field=all|cs|math, split=all|dev|test")
def arxivmia(data_dir: str | Path | None, on_invalid: str, *, field: str = "all",
             split: str = "all") -> Dataset:
    field = str(choose("arxivmia field", field, FIELDS))
    fname = FILES[str(choose("arxivmia split", split, tuple(FILES)))]
    if data_dir is not None:
        path = Path(data_dir) / fname
        if not path.is_file():
            raise PddkitError(f"`data_dir` {data_dir} has no {fname}")
    else:
        path = hub_file(REPO, fname)
    rows = [(no, {**r, "subset": r.get("field")} if isinstance(r, dict) else r)
            for no, r in jsonl_values(path)]
    if field != "all":
        rows = [(no, r) for no, r in rows if not isinstance(r, dict) or r.get("field") == field]
    return rows_to_dataset(tagged(rows), f"arxivmia:field={field},split={split}", str(path),
                           on_invalid=on_invalid, unit="line", meta={"language": "en"})
