"""Benchmarks and files become labelled texts (`Dataset`): records and tables, the
benchmarks' loaders (benchmarks/, registry.py there), n-gram overlap checks, shots,
calibration texts and stratified splits. The benchmark builders (data/builders) read
training-corpus indexes and are a layer of their own, above pddkit.corpus.

May import: errors, version, params, registry, progress, stats, provenance and output_dir.
"""

from pddkit.data.benchmarks import BENCHMARKS, load_benchmark, register_benchmark
from pddkit.data.jsonl import load_jsonl
from pddkit.data.records import Fields
from pddkit.data.samples import Dataset, Sample, Skipped
from pddkit.data.sources import DataSource
from pddkit.data.tables import load_table

__all__ = [
    "BENCHMARKS",
    "DataSource",
    "Dataset",
    "Fields",
    "Sample",
    "Skipped",
    "load_benchmark",
    "load_jsonl",
    "load_table",
    "register_benchmark",
]
