"""PEFT adapters: whether a folder or hub repository is one (its adapter_config.json),
the base model it loads onto, and attaching it, unmerged, to a loaded model (weights that
do not fit that model are one sentence)."""

from __future__ import annotations

import logging
from pathlib import Path

from pddkit.backends.model_source import check_source, looks_local
from pddkit.errors import PddkitError, install_hint

logger = logging.getLogger(__name__)

ADAPTER_CONFIG = "adapter_config.json"  # what marks a PEFT adapter folder or hub repository


def checked_source(name: str, adapter: str | None, *, role: str, trust_remote_code: bool,
                   revision: str | None, local_files_only: bool) -> tuple[str, str | None, bool]:
    """(base model, adapter, `local_files_only` as loading should use it) for `name` with
    `adapter`, refused in one sentence now if it cannot load: a bad local adapter folder, a
    missing local path, a hub id neither cached nor reachable. Hub adapters are looked up
    when loading."""
    base, with_adapter = resolve_adapter(name, adapter, role=role, revision=revision,
                                         local_files_only=local_files_only, hub=False)
    return base, with_adapter, check_source(base, role, trust_remote_code, revision,
                                            local_files_only)


def adapter_param(role: str) -> str:
    """The parameter naming the adapter of a model in `role` (errors name it)."""
    return "ref_adapter" if role.startswith("ref") else "adapter"


def adapter_config(name: str, *, revision: str | None = None, local_files_only: bool = False,
                   hub: bool = True) -> dict | None:
    """The adapter_config.json of `name` when it is a PEFT adapter (a local folder holding
    one, or, with `hub`, a hub repository that has one), else None."""
    import json

    if looks_local(name):
        path = Path(name).expanduser() / ADAPTER_CONFIG
        if not path.is_file():
            return None
    elif not hub:
        return None
    else:
        try:
            from transformers.utils import find_adapter_config_file

            found = find_adapter_config_file(name, revision=revision,
                                             local_files_only=local_files_only)
        except Exception:  # unreachable, gated, malformed id: not known to be an adapter
            return None
        if found is None:
            return None
        path = Path(found)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PddkitError(f"the PEFT adapter {name} has an unreadable {ADAPTER_CONFIG}: "
                          f"{e}") from None
    if not isinstance(data, dict):
        raise PddkitError(f"the PEFT adapter {name} has an {ADAPTER_CONFIG} that is not a "
                          "JSON object")
    return data


def is_adapter_folder(name: str) -> bool:
    """Whether `name` is a local folder holding a PEFT adapter alone (adapter_config.json,
    no config.json of a complete model)."""
    if not looks_local(name):
        return False
    d = Path(name).expanduser()
    return (d / ADAPTER_CONFIG).is_file() and not (d / "config.json").is_file()


def resolve_adapter(name: str, adapter: str | None, *, role: str = "model",
                    revision: str | None = None, local_files_only: bool = False,
                    hub: bool = True) -> tuple[str, str | None]:
    """(base model, adapter) to load for the model `name` with `adapter`: a `name` that is
    a PEFT adapter (a folder with adapter_config.json and no config.json; with `hub`, also
    a hub repository with one, looked up only when peft is installed) gives the base model
    its config names (base_model_name_or_path) and itself as the adapter. A given
    `adapter` must be a PEFT adapter; an adapter whose config names another base than
    `name` is loaded with a warning (a local copy and a hub id of one model differ in name
    only; weights that do not fit the model are refused by attach_adapter)."""
    param = adapter_param(role)
    if adapter is not None:
        if looks_local(adapter) and not Path(adapter).expanduser().exists():
            raise PddkitError(f"`{param}` path {adapter} does not exist")
        cfg = adapter_config(adapter, revision=None, local_files_only=local_files_only, hub=hub)
        if cfg is None and (looks_local(adapter) or hub):
            raise PddkitError(f"`{param}` {adapter} is not a PEFT adapter: it has no "
                              f"{ADAPTER_CONFIG} (give the folder or hub id that "
                              "save_pretrained of a PEFT model wrote)")
        if is_adapter_folder(name):
            raise PddkitError(f"{role} {name} is itself a PEFT adapter ({ADAPTER_CONFIG}) and "
                              f"`{param}` {adapter} is another: give the base model as the "
                              f"model and one adapter as `{param}`")
        named = (cfg or {}).get("base_model_name_or_path")
        if hub and named and not same_model(named, name):  # said once, when loading
            logger.warning("`%s` %s was trained on %s, not on %s (%s): loading it anyway; "
                           "weights that do not fit the model are refused", param, adapter,
                           named, name, role)
        return name, adapter
    if is_adapter_folder(name):
        cfg = adapter_config(name) or {}
    elif hub and not looks_local(name) and _peft_installed():
        cfg = adapter_config(name, revision=revision, local_files_only=local_files_only)
        if cfg is None:
            return name, None
    else:
        return name, None
    base = cfg.get("base_model_name_or_path")
    if not base:
        raise PddkitError(f"{role} {name} is a PEFT adapter whose {ADAPTER_CONFIG} names no "
                          f"base model (base_model_name_or_path): give the base model as the "
                          f"model and this folder as `{param}`")
    if looks_local(base) and not Path(base).expanduser().exists():
        raise PddkitError(f"{role} {name} is a PEFT adapter on {base} (base_model_name_or_path "
                          f"in its {ADAPTER_CONFIG}), which does not exist here: give the base "
                          f"model as the model and this adapter as `{param}`")
    logger.info("%s %s is a PEFT adapter: loading its base model %s with it", role, name, base)
    return base, name


def same_model(a: str, b: str) -> bool:
    """Whether two model names name one model: equal, the same local folder, or a hub
    id and its snapshot folder in the hub cache."""
    if a == b or a.rstrip("/") == b.rstrip("/"):
        return True

    def key(n: str) -> str:
        if looks_local(n):
            p = Path(n).expanduser()
            p = p.resolve() if p.exists() else p
            parts = p.parts
            for i, part in enumerate(parts):  # .../models--org--name/snapshots/<commit>
                if part.startswith("models--") and parts[i + 1:i + 2] == ("snapshots",):
                    return part[len("models--"):].replace("--", "/")
            return str(p)
        return n

    return key(a) == key(b)


def _peft_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("peft") is not None


def attach_adapter(model, adapter: str, *, base: str, role: str = "model",
                   revision: str | None = None, local_files_only: bool = False) -> None:
    """Load the PEFT adapter `adapter` onto `model` (transformers' PEFT integration: the
    model keeps its class, the adapter stays unmerged, in eval mode). Weights that do not
    fit (a module it adapts that the model lacks, a shape that differs, a tensor the model
    has no place for or left without a value) are one sentence: the adapter was made for
    another base."""
    param = adapter_param(role)
    if not _peft_installed():
        raise PddkitError(f"`{param}` needs peft: {install_hint('adapters')}")
    src = str(Path(adapter).expanduser()) if looks_local(adapter) else adapter
    # offline for a hub id through adapter_kwargs (transformers 5 refuses load_adapter's own
    # local_files_only); a local folder needs neither
    offline = {"local_files_only": True} if local_files_only and not looks_local(adapter) else {}
    try:
        info = model.load_adapter(src, adapter_name="default", adapter_kwargs=offline or None)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"`{param}` {adapter} does not fit {role} {base}: {first}") from None
    bad = [*sorted(getattr(info, "missing_keys", ()) or ()),
           *sorted(getattr(info, "unexpected_keys", ()) or ()),
           *sorted(k[0] if isinstance(k, tuple) else k
                   for k in getattr(info, "mismatched_keys", ()) or ())]
    if bad:
        more = f" and {len(bad) - 2} more" if len(bad) > 2 else ""
        raise PddkitError(f"`{param}` {adapter} does not fit {role} {base}: its weights "
                          f"{', '.join(bad[:2])}{more} have no place of that shape in the "
                          "model (an adapter made for another base model)")
    model.eval()
