"""Where a model is read from: a local folder or a Hugging Face hub id, checked before
loading (a missing path, a folder holding no model or a sandbox's output folder, a hub id
neither cached nor reachable: one sentence each, in seconds), and the arguments
`from_pretrained` is given for it."""

from __future__ import annotations

from pathlib import Path

from pddkit.errors import PddkitError


def looks_local(name: str) -> bool:
    """Whether `name` is a local path rather than a hub id."""
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists() or \
        name.count("/") > 1 or "\\" in name


def check_source(name: str, role: str, trust_remote_code: bool, revision: str | None,
                 local_files_only: bool, reachable: bool | None = None) -> bool:
    """Refuse a local path that does not exist, or a hub id neither cached nor reachable
    (one sentence, in seconds); returns `local_files_only` as loading should use it.
    `reachable`: hub_reachable()'s answer when the caller has it (else it is asked)."""
    if looks_local(name):
        if not Path(name).expanduser().exists():
            raise PddkitError(f"{role} path {name} does not exist")
        refuse_sandbox_folder(name, role)
        _refuse_folder_without_model(name, role)
        return local_files_only
    if not local_files_only:
        return _hub_files_needed(name, role, trust_remote_code, revision, reachable)
    return local_files_only


def refuse_sandbox_folder(name: str, role: str) -> None:
    """A sandbox's output folder given as a model: one sentence saying where its models are."""
    from pddkit.backends.sandbox_folders import not_a_model

    said = not_a_model(name, role)
    if said:
        raise PddkitError(said)


# files a tokenizer's save_pretrained writes (one of them is enough to call a folder a tokenizer)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "tokenizer.model", "spiece.model", "vocab.txt", "special_tokens_map.json")


def _refuse_folder_without_model(name: str, role: str) -> None:
    """A local folder without config.json, which every saved model has: one sentence
    (a folder holding only a tokenizer says so) instead of transformers' "Unrecognized
    model ... model_type"."""
    folder = Path(name).expanduser()
    if not folder.is_dir() or (folder / "config.json").is_file():
        return
    tokenizer = sorted(f for f in TOKENIZER_FILES if (folder / f).is_file())
    if tokenizer:
        raise PddkitError(f"{role} folder {name} holds only a tokenizer ({', '.join(tokenizer)}), "
                          "no model: a model folder also needs config.json and the weights "
                          "(model.safetensors), as the model's save_pretrained writes them; "
                          "give that folder")
    raise PddkitError(f"{role} folder {name} holds no model: config.json is missing (a model "
                      "folder holds config.json and the weights, as the model's "
                      "save_pretrained writes them)")


def pretrained_source(name: str, trust_remote_code: bool, local_files_only: bool,
            revision: str | None) -> tuple[str, dict]:
    """(what `from_pretrained` is given, its shared keyword arguments) for `name`."""
    src = str(Path(name).expanduser()) if looks_local(name) else name
    common = {"trust_remote_code": trust_remote_code, "local_files_only": local_files_only}
    if revision is not None:
        common["revision"] = revision
    return src, common


def _hub_files_needed(name: str, role: str, trust_remote_code: bool, revision: str | None,
                      reachable: bool | None = None) -> bool:
    """Whether a hub id can load from the local cache alone (then: no network at all). If
    it cannot and the hub is unreachable, one sentence now instead of minutes of retries."""
    import os
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(name, local_files_only=True, revision=revision,
                                   trust_remote_code=trust_remote_code)
        cached = True  # at least its config is cached; weights may still be missing
    except (OSError, ValueError, KeyError):
        cached = False
    if hub_reachable() if reachable is None else reachable:
        return False  # reachable: load as usual (the cache is used where it has the files)
    if cached:
        return True  # offline, but cached: load from the cache
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    raise PddkitError(f"{role} {name} is not in the local Hugging Face cache and the hub "
                      f"({url.hostname}) cannot be reached: give a local directory, or load "
                      "it once online (`local_files_only` / HF_HUB_OFFLINE=1 use the cache "
                      "only)")


def hub_reachable() -> bool:
    """Whether the Hugging Face hub (HF_ENDPOINT) accepts a connection within 5 seconds;
    HF_HUB_OFFLINE=1 says no without trying."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=5).close()
        return True
    except OSError:
        return False
