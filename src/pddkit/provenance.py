"""What ran, where and when: the "provenance" block of every results.json pddkit writes.

`Provenance.collect(started_at=...)` records the pddkit version and, when pddkit runs
from a git checkout, its commit and whether the work tree had uncommitted changes; the
versions of Python and the libraries the numbers depend on; the device(s) the models ran
on and the CPU; the command line; the start and end times; and the fingerprints of the
models that a run already computed (the statistics cache computes them; they are never
computed here, so a run without the cache does not hash the weights for this).

Collecting imports neither torch nor transformers (a cached rerun imports neither, and
stays fast): library versions come from importlib.metadata, and a GPU is named through
torch only when the run has already imported torch. Nothing here fails a run: a missing
git, or a package installed from a wheel, is a null commit with the reason.
"""

from __future__ import annotations

import logging
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pddkit.version import __version__

logger = logging.getLogger(__name__)

LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "scikit-learn")
API = "python API"  # the command line of a run started from Python, not from `pddkit`
NOT_COMPUTED = ("not computed: the statistics cache (`cache`) fingerprints the model; a run "
                "without it does not hash the weights")
_GIT_TIMEOUT_S = 10
_command: str | None = None  # set by the CLI while a command runs (process-wide)


def now() -> str:
    """The local time, ISO 8601 with its UTC offset (e.g. 2025-05-01T14:03:07+02:00)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


@contextmanager
def command_line(argv: Iterable[str] | None = None) -> Iterator[str]:
    """While the `pddkit` command runs: the command line, as typed, that results record.
    `argv`: the arguments after the program name (None: sys.argv's)."""
    global _command
    if argv is None:
        prog = ("python -m pddkit" if Path(sys.argv[0]).name == "__main__.py"
                else Path(sys.argv[0]).name or "pddkit")
        args = sys.argv[1:]
    else:
        prog, args = "pddkit", list(argv)
    before, _command = _command, " ".join([prog, shlex.join(str(a) for a in args)]).strip()
    try:
        yield _command
    finally:
        _command = before


def current_command() -> str:
    """The `pddkit` command line being run, or "python API" outside the CLI."""
    return _command or API


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          timeout=_GIT_TIMEOUT_S, check=False)


def git_state(source: Path | None = None) -> dict:
    """{"commit", "dirty", "reason"} of the git work tree holding pddkit's own source (a
    checkout installed with `pip install -e`): commit = `git rev-parse HEAD`, dirty =
    `git status --porcelain` is non-empty; commit and dirty null, with the reason, when
    git is missing or the package is not tracked in a work tree (a wheel install)."""
    src = source or Path(__file__).resolve().parent
    nothing = {"commit": None, "dirty": None}
    try:
        head = _git(["rev-parse", "HEAD"], src)
        if head.returncode != 0:
            return {**nothing, "reason": f"{src} is not in a git work tree"}
        # a wheel installed inside some other repository (a venv in a project) is not tracked
        own = _git(["ls-files", "--", "__init__.py"], src)  # prints it when it is tracked
        if own.returncode != 0 or not own.stdout.strip():
            return {**nothing, "reason": f"pddkit's source {src} is not tracked by git"}
        status = _git(["status", "-z"], src)  # porcelain v1 (NUL-separated)
        if status.returncode != 0:
            return {"commit": head.stdout.strip(), "dirty": None,
                    "reason": f"git status failed: {status.stderr.strip()[:200]}"}
    except FileNotFoundError:
        return {**nothing, "reason": "git is not installed"}
    except (OSError, subprocess.SubprocessError) as e:
        return {**nothing, "reason": f"git could not be run: {e}"}
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()), "reason": None}


def library_versions(names: Iterable[str] = LIBRARIES) -> dict[str, str | None]:
    """Installed versions (None: not installed), read from metadata: nothing is imported."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo on Linux, else platform.processor())."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def _usable_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def device_entry(device: str) -> dict:
    """{"device", "name"} of a device string ("cuda:0", "cuda", "cpu", "mps"). A GPU is
    named through torch only when torch is already imported (never imported for this)."""
    if device == "cpu":
        return {"device": "cpu", "name": cpu_model()}
    if device.startswith("cuda"):
        torch = sys.modules.get("torch")
        if torch is None:
            return {"device": device, "name": None,
                    "reason": "torch was not imported by this run (nothing ran on the GPU)"}
        try:
            index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
            return {"device": f"cuda:{index}", "name": torch.cuda.get_device_name(index)}
        except Exception as e:  # a name is not worth failing a run for
            return {"device": device, "name": None, "reason": f"torch could not name it: {e}"}
    if device == "mps":
        return {"device": "mps", "name": cpu_model()}
    return {"device": device, "name": None}


def known_fingerprint(backend) -> str | None:
    """The model fingerprint a backend has already computed (cache/fingerprint.py), read
    without computing one: the statistics cache's remembered facts, else the backend's own."""
    seen = set()
    while backend is not None and id(backend) not in seen:
        seen.add(id(backend))
        facts = getattr(backend, "_facts", None)
        if isinstance(facts, Mapping) and isinstance(facts.get("fingerprint"), str):
            return facts["fingerprint"]
        own = getattr(backend, "_fingerprint", None)
        if isinstance(own, str) and not hasattr(backend, "store"):  # the cache's is its key
            return own
        backend = getattr(backend, "backend", None)
    return None


def _models(models: Mapping, fingerprints: Mapping) -> dict:
    """role -> {"name", "fingerprint"} (+ "reason" when there is none) for each model."""
    out = {}
    for role, info in models.items():
        if role == "frequency_table" or not isinstance(info, Mapping):
            continue
        fp = fingerprints.get(role)
        out[role] = {"name": info.get("name"), "fingerprint": fp,
                     **({} if fp else {"reason": NOT_COMPUTED})}
    for role, fp in fingerprints.items():
        out.setdefault(role, {"name": None, "fingerprint": fp,
                              **({} if fp else {"reason": NOT_COMPUTED})})
    return out


@dataclass(frozen=True)
class Provenance:
    """The provenance block of a results.json (see the module docstring)."""

    pddkit_version: str
    git: dict  # commit, dirty, reason
    python: str
    libraries: dict  # name -> version (None: not installed)
    devices: tuple  # ({"device", "name"[, "reason"]}, ...): where the models ran
    cpu: dict  # model, count (os.cpu_count), usable (the cores this process may use)
    command: str  # the `pddkit ...` command line, or "python API"
    started_at: str  # ISO 8601 with UTC offset
    finished_at: str
    models: dict  # role -> {"name", "fingerprint"[, "reason"]}

    @classmethod
    def collect(cls, started_at: str | None = None, *, models: Mapping | None = None,
                fingerprints: Mapping | None = None,
                devices: Iterable[str] | None = None) -> Provenance:
        """The provenance of work started at `started_at` (now() when None) and finished
        now. `models`: results.json's "models" (role -> facts, each with its "device");
        `fingerprints`: role -> the fingerprint already computed (None: not computed);
        `devices`: where the work ran when the models do not say (default: the CPU)."""
        models = dict(models or {})
        if devices is None:
            devices = [str(i["device"]) for i in models.values()
                       if isinstance(i, Mapping) and i.get("device")]
        devices = list(dict.fromkeys(devices)) or ["cpu"]
        return cls(
            pddkit_version=__version__, git=git_state(), python=platform.python_version(),
            libraries=library_versions(), devices=tuple(device_entry(d) for d in devices),
            cpu={"model": cpu_model(), "count": os.cpu_count(), "usable": _usable_cpus()},
            command=current_command(), started_at=started_at or now(), finished_at=now(),
            models=_models(models, dict(fingerprints or {})))

    @classmethod
    def of_runs(cls, started_at: str | None, runs: Mapping[str, Provenance]) -> Provenance:
        """One provenance for work made of several runs (compare's two models): `runs`
        maps a role to the provenance of the run whose target model plays it."""
        first = next(iter(runs.values()))
        devices = {d["device"]: d for p in runs.values() for d in p.devices}
        models = {role: p.models["target"] for role, p in runs.items() if "target" in p.models}
        return replace(first, devices=tuple(devices.values()), models=models,
                       started_at=started_at or first.started_at, finished_at=now())

    def spanning(self, started_at: str | None) -> Provenance:
        """This provenance for work that began at `started_at` (a study around a run) and
        ends now."""
        return replace(self, started_at=started_at or self.started_at, finished_at=now())

    def to_dict(self) -> dict:
        out = asdict(self)
        out["devices"] = [dict(d) for d in self.devices]
        return out


def provenance_dict(provenance: Provenance | Mapping | None) -> dict | None:
    """What results.json holds for `provenance` (a Provenance or its dict)."""
    if provenance is None:
        return None
    return provenance.to_dict() if isinstance(provenance, Provenance) else dict(provenance)
