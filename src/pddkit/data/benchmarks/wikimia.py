"""WikiMIA (Shi et al. 2024): Wikipedia event texts from before 2017 (members of most
models' pre-training data) vs after 2023."""

from __future__ import annotations

from pathlib import Path

from pddkit.data.benchmarks import register_benchmark
from pddkit.data.hub import hub_rows
from pddkit.data.jsonl import load_jsonl
from pddkit.data.records import rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

WIKIMIA_LENGTHS = (32, 64, 128, 256)


@register_benchmark("wikimia", "WikiMIA (Shi et al. 2024): Wikipedia events before 2017 vs after 2023")
def wikimia(data_dir: str | Path | None, on_invalid: str, *, length: int = 32) -> Dataset:
    if length not in WIKIMIA_LENGTHS:
        raise PddkitError(f"wikimia length must be one of {WIKIMIA_LENGTHS}, not {length}")
    fname = f"WikiMIA_length{length}"
    if data_dir is not None:
        path = Path(data_dir) / f"{fname}.jsonl"
        if not path.is_file():
            raise PddkitError(f"`data_dir` {data_dir} has no {fname}.jsonl")
        return load_jsonl(path, on_invalid=on_invalid, name=f"wikimia:length={length}")
    rows = hub_rows("swj0419/WikiMIA", split=fname)
    return rows_to_dataset(((i, dict(r)) for i, r in enumerate(rows, start=1)),
                           f"wikimia:length={length}", f"swj0419/WikiMIA {fname}",
                           on_invalid=on_invalid)
