"""`name:k=v,k2=v2` specs for methods and benchmarks, typed from the defaults."""

from __future__ import annotations

from pddkit.errors import PddkitError


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """`"surp:entropy_threshold=2.5,k=30"` -> ("surp", {"entropy_threshold": "2.5", "k": "30"}).
    Names are lower-cased (registered names are: `Mink` is `mink`, `ALL` is `all`)."""
    name, _, rest = spec.strip().partition(":")
    name = name.lower()
    params: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise PddkitError(f"in {spec!r}: {part!r} is not key=value")
        if key.strip() in params:
            raise PddkitError(f"in {spec!r}: {key.strip()} is given twice ({key.strip()}="
                              f"{params[key.strip()]} and {part}); to compare values, name the "
                              f"method once per value, e.g. {name.strip()}:{key.strip()}="
                              f"{params[key.strip()]},{name.strip()}:{part}")
        params[key.strip()] = value.strip()
    return name.strip(), params


def split_spec_list(text: str) -> list[str]:
    """Split `--methods` on commas, keeping `k=v` pieces with the method before them.

    `"loss,surp:entropy_threshold=2.5,k=30,mink"` -> `["loss", "surp:entropy_threshold=2.5,k=30", "mink"]`.
    """
    specs: list[str] = []
    for piece in filter(None, (p.strip() for p in text.split(","))):
        if "=" in piece and ":" not in piece:
            if not specs:
                raise PddkitError(f"{piece!r} comes before any method name")
            specs[-1] += ("," if ":" in specs[-1] else ":") + piece
        else:
            specs.append(piece)
    return specs


def _coerce(owner: str, key: str, default: object, value: object) -> object:
    if not isinstance(value, str):
        return value
    kind = type(default)
    try:
        if kind is bool:
            if value.lower() in ("1", "true", "yes"):
                return True
            if value.lower() in ("0", "false", "no"):
                return False
            raise ValueError
        if kind is int:
            return int(value)
        if kind is float:
            return float(value)
    except ValueError:
        raise PddkitError(f"{owner}: {key}={value!r} is not a {kind.__name__}") from None
    return value


def bind_params(owner: str, defaults: dict, given: dict) -> dict:
    """Defaults updated by `given`, each value converted to the default's type."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        known = ", ".join(defaults) or "none"
        raise PddkitError(f"{owner} has no parameter {unknown[0]!r} (parameters: {known})")
    return {k: _coerce(owner, k, v, given.get(k, v)) for k, v in defaults.items()}
