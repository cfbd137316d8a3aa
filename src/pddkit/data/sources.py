"""Where the texts of a run come from: a table (`data`: a file, a `datasets` folder or a
hub id) or a registered benchmark (`benchmark`, read from `data_dir` or the hub)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pddkit.data.records import DEFAULT_FIELDS, Fields
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError


@dataclass(frozen=True)
class DataSource:
    """`data` or `benchmark` (exactly one), and how to read it."""

    data: str | Path | None = None
    benchmark: str | None = None
    data_dir: str | Path | None = None
    fields: Fields = DEFAULT_FIELDS
    data_split: str | None = None
    language: str | None = None  # declared by the user; overrides what a loader records
    on_invalid: str = "error"

    def load(self) -> Dataset:
        from pddkit.data.benchmarks import load_benchmark
        from pddkit.data.tables import load_table

        if (self.data is None) == (self.benchmark is None):
            raise PddkitError("give exactly one of `data` and `benchmark`")
        if self.data is not None:
            if self.data_dir is not None:
                raise PddkitError("`data_dir` is the folder of a `benchmark`'s files; with "
                                  "`data` it would be ignored")
            dataset = load_table(self.data, self.fields, self.on_invalid, split=self.data_split)
        else:
            if self.fields != DEFAULT_FIELDS or self.data_split is not None:
                raise PddkitError("`text_field`, `label_field`, `id_field`, `group_field`, "
                                  "`subset_field` and `data_split` are for `data`: a benchmark "
                                  "knows its own fields")
            dataset = load_benchmark(self.benchmark, data_dir=self.data_dir,
                                     on_invalid=self.on_invalid)
        if self.language is not None:
            dataset = dataset.with_meta(language=self.language)
        return dataset
