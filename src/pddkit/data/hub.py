"""Reading benchmark files from the Hugging Face hub (online, `pip install -e '.[hub]'`);
every failure is one sentence that names the offline alternative (`data_dir`)."""

from __future__ import annotations

import importlib
from pathlib import Path

from pddkit.errors import PddkitError, install_hint


def _hub_module(module: str, repo: str):
    """`datasets` or `huggingface_hub`, or one sentence saying how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise PddkitError(f"loading {repo} from the hub needs {install_hint('hub')}; or "
                          "download it and pass `data_dir`") from None


def hub_rows(repo: str, split: str):
    """One split of a hub dataset (`datasets.load_dataset`)."""
    datasets = _hub_module("datasets", repo)
    try:
        return datasets.load_dataset(repo, split=split)
    except Exception as e:  # network, missing split, ...
        raise PddkitError(f"could not load {repo} split {split} from the hub "
                          f"({type(e).__name__}); offline users pass `data_dir` with the "
                          "JSONL files") from None


def hub_file(repo: str, filename: str, repo_type: str = "dataset") -> Path:
    """One raw file of a hub repository (downloaded once into the hub cache): for repos
    whose loading script `datasets>=4` refuses to run (MIMIR)."""
    hub = _hub_module("huggingface_hub", repo)
    try:
        return Path(hub.hf_hub_download(repo_id=repo, repo_type=repo_type, filename=filename))
    except Exception as e:  # offline, no such file, gated repo, ...
        raise PddkitError(f"could not download {filename} of {repo} from the hub "
                          f"({type(e).__name__}); offline users pass `data_dir`, a folder "
                          f"holding {filename}") from None
