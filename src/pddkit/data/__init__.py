"""Benchmarks and files become labelled texts (`Dataset`)."""

from pddkit.data.benchmarks import BENCHMARKS, load_benchmark, register_benchmark
from pddkit.data.jsonl import load_jsonl
from pddkit.data.samples import Dataset, Sample, Skipped

__all__ = [
    "BENCHMARKS",
    "Dataset",
    "Sample",
    "Skipped",
    "load_benchmark",
    "load_jsonl",
    "register_benchmark",
]
