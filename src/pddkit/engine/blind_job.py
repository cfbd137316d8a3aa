"""The blind baseline of a run (blind/baseline.py), computed beside the model passes.

It needs the texts and labels only, no model, so it runs where a CPU core is idle:
- `thread`: where the model passes leave a core idle for their whole length (a GPU, a
  served model, a machine with many cores), on a thread started before them;
- `process`: on a small CPU-only machine that loads the model itself, in a child process
  started before the model loads: importing torch and loading the weights use one core,
  the child the other (one BLAS thread), so the baseline is mostly done before the
  forward pass, which uses every core, begins. A thread would share the interpreter lock
  with those imports; a child started with `python -m` re-imports no user script;
- `inline`: after the passes, where nothing is left to overlap (a model passed in already
  loaded, or the scores already in the cache's memo).
Its scores are the same in all three (the classifier is seeded and runs on one thread).
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import numpy as np

from pddkit.data.samples import Dataset
from pddkit.engine.config import RunConfig
from pddkit.engine.stages import StageSkippedError
from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult

logger = logging.getLogger(__name__)


class BlindJob:
    """`BlindJob.start(dataset, config, test_idx, where)` now, `.result(notices)` later
    (`.cancel()` when the run fails before asking)."""

    def __init__(self, dataset: Dataset, config: RunConfig, test_idx: np.ndarray | None,
                 where: str) -> None:
        self._args = (dataset, config, test_idx)
        self.where = where
        self._notices: list[str] = []
        self._result: MethodResult | None = None
        self._error: BaseException | None = None
        self._child: subprocess.Popen | None = None
        self._stop: weakref.finalize | None = None  # stops the child of a job dropped unasked
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._work, name="pddkit-blind", daemon=True)

    @classmethod
    def start(cls, dataset: Dataset, config: RunConfig, test_idx: np.ndarray | None,
              where: str | None = None, model_given: bool = False) -> BlindJob:
        """Begin now on a `thread` or in a child `process`, or `inline` when `result` is
        asked for; default `where_to_run(config, model_given)`, inline on a memo hit."""
        if where is None:
            where = where_to_run(config, model_given)
            if where != "inline" and _memo_holds(dataset, config):
                where = "inline"  # reading the memo is quicker than starting anything
        job = cls(dataset, config, test_idx, where)
        if where == "thread":
            job._thread.start()
        elif where == "process":
            job._spawn()
        return job

    def serves(self, dataset: Dataset, config: RunConfig, test_idx: np.ndarray | None) -> bool:
        """Whether this job's answer is the baseline of `dataset` under `config`: the same
        texts, ids, labels, documents and subsets, the same test part, and the same seed,
        bootstraps, sample size and cache (a job started before the run knew them)."""
        mine, my_config, my_test = self._args
        fields = ("seed", "n_bootstrap", "blind_max_texts", "cache")
        return (_inputs(mine) == _inputs(dataset)
                and all(getattr(my_config, f) == getattr(config, f) for f in fields)
                and (my_test is None) == (test_idx is None)
                and (test_idx is None or np.array_equal(my_test, test_idx)))

    def _work(self) -> None:
        t0 = time.perf_counter()
        try:
            self._result = blind_baseline(*self._args, self._notices)
        except BaseException as e:  # re-raised in the caller's thread by result()
            self._error = e
        self.seconds = time.perf_counter() - t0

    def _spawn(self) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}  # one core: the parent keeps the rest
        self._dir = Path(tempfile.mkdtemp(prefix="pddkit-blind-"))
        # the answer goes to a file (a stray print in the child cannot corrupt it), the
        # child's stderr to another (a traceback there is not the user's to read)
        with (self._dir / "stderr.txt").open("wb") as err:
            try:
                self._child = subprocess.Popen(
                    [sys.executable, "-m", "pddkit.engine.blind_job", str(self._dir / "answer")],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=env)
            except OSError as e:  # no usable interpreter (embedded, frozen): compute it here
                logger.info("could not start the blind baseline's process (%s); it runs here", e)
                self._cleanup()
                self.where = "inline"
                return
        # a job dropped unanswered (its run failed before asking) stops its child and
        # removes its folder when it is collected, or at exit
        self._stop = weakref.finalize(self, _stop_child, self._child, self._dir)
        payload = pickle.dumps(self._args, protocol=pickle.HIGHEST_PROTOCOL)
        # written on a thread: a payload larger than the pipe's buffer must not block the
        # run; the thread holds the child and the bytes, not the job (which stays
        # collectable, so that its finaliser can stop a child nobody will ask)
        self._writer = threading.Thread(target=_write, args=(self._child, payload), daemon=True)
        self._writer.start()

    def _collect(self) -> None:
        self._child.wait()
        self._writer.join()
        answer = None
        if self._child.returncode == 0:
            try:
                answer = pickle.loads((self._dir / "answer").read_bytes())  # our own child's
            except Exception:  # not a Python that ran pddkit, or a broken file
                answer = None
        if answer is None:  # e.g. pddkit not importable there: say why, compute it here
            err = (self._dir / "stderr.txt").read_text(errors="replace").strip().splitlines()
            logger.warning("the blind baseline's process ended with code %s and no result%s; "
                           "computing it here", self._child.returncode,
                           f" ({err[-1][:200]})" if err else "")
            self._cleanup()
            self._work()
            return
        self._cleanup()
        kind, value, records, notices, seconds = answer
        for name, level, message in records:  # its log lines, as if logged here
            logging.getLogger(name).log(level, message)
        self._notices.extend(notices)
        self.seconds = seconds
        if kind == "error":
            self._error = value
        else:
            self._result = value

    def _cleanup(self) -> None:
        if self._stop is not None:
            self._stop.detach()
        shutil.rmtree(self._dir, ignore_errors=True)

    def result(self, notices: list[str]) -> MethodResult:
        """The baseline's MethodResult (its notices added to `notices`); waits for the
        thread or the child, or computes it now. Raises what the baseline raised
        (StageSkippedError when the texts cannot support it)."""
        if self._child is not None:
            self._collect()
            self._child = None
        else:
            if self._thread.ident is None:  # not started in the background
                self._thread.start()
            self._thread.join()
        notices.extend(self._notices)
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self) -> None:
        """Stop a child that is no longer wanted (the run failed before asking for it)."""
        if self._child is not None:
            self._stop()
            self._child = None


def _write(child: subprocess.Popen, payload: bytes) -> None:
    try:
        child.stdin.write(payload)
        child.stdin.close()
    except (BrokenPipeError, OSError):  # the child died: result() says why
        pass


def _stop_child(child: subprocess.Popen, folder: Path) -> None:
    if child.poll() is None:
        child.kill()
        child.wait()
    shutil.rmtree(folder, ignore_errors=True)


MANY_CORES = 8  # a CPU-only forward pass hardly misses one core out of this many


def where_to_run(config: RunConfig, model_given: bool = False) -> str:
    """`thread` where the passes leave a core idle (`beside_the_passes`), else `process`
    while this run still has a model to load, else `inline`."""
    if beside_the_passes(config):
        return "thread"
    return "inline" if model_given else "process"


def beside_the_passes(config: RunConfig) -> bool:
    """Whether the model passes leave a core for the baseline: a served model, a GPU or
    MPS device, or (device "auto" on an unknown machine, told without importing torch)
    at least MANY_CORES cores."""
    if config.backend != "hf":
        return True
    device = str(config.device)
    if device.startswith(("cuda", "mps", "xpu")):
        return True
    return device == "auto" and (os.cpu_count() or 1) >= MANY_CORES


def unfit_reason(dataset: Dataset) -> str | None:
    """Why the baseline cannot be fitted on these texts, found before it starts (fewer than
    2 members or non-members, or documents of each with groups, to make folds of; no text
    with a word: blind/requirements.py `word_shortage`), or None."""
    from pddkit.blind.requirements import TOO_FEW, word_shortage

    y = np.asarray(dataset.labels)
    groups = _groups(dataset.samples)
    if groups is None:
        per_class = [int((y == c).sum()) for c in (0, 1)]
    else:
        per_class = [len({g for g, v in zip(groups, y) if v == c}) for c in (0, 1)]
    if min(per_class) < 2:
        return TOO_FEW
    return word_shortage([s.text for s in dataset.samples])


def blind_baseline(dataset: Dataset, config: RunConfig, test_idx: np.ndarray | None,
                   notices: list[str]) -> MethodResult:
    """Out-of-fold scores of the model-free classifier for every text; its metrics on the
    test part when there is a validation split. When the data set has subsets
    (evaluation/subsets.py), the classifier is also fitted within each subset, with its
    own cross-validation on that subset's texts only, for that subset's metrics.
    StageSkippedError when the texts cannot support it (too few of a class, no word)."""
    from pddkit.evaluation.subsets import breakdown, fitted_within

    labels = np.asarray(dataset.labels)
    try:
        scores, folds, grouped, how = _out_of_fold(dataset.samples, labels, config)
    except PddkitError as e:  # too few texts, no word: the run goes on without it
        raise StageSkippedError(str(e)) from None
    sel = slice(None) if test_idx is None else test_idx
    metrics = compute_metrics(scores[sel], labels[sel], n_bootstrap=config.n_bootstrap,
                              seed=config.seed)
    from pddkit.blind.verdict import with_sample
    from pddkit.evaluation.subsets import run_units

    params: dict = {"folds": folds, "grouped_by_document": grouped,
                    "neighbour_search": how["neighbour_search"]}
    subsets = [s.subset for s in dataset.samples]
    params.update(run_units(labels, _groups(dataset.samples), test_idx, subsets))
    if how["sample"] is not None:  # said in results.json, the terminal and the report
        params["sample"] = {"texts": how["sample"], "of": len(labels)}
        params["units"] = with_sample(params.get("units"), labels[sel], params["sample"])
    per: dict = {}
    if breakdown(subsets):
        params["per_subset"] = "fitted within each subset (its own cross-validation)"
        per = fitted_within(subsets, labels, test_idx, lambda idx: _out_of_fold(
            tuple(dataset.samples[i] for i in idx), labels[idx], config)[0],
            config.n_bootstrap, config.seed, notices)
    return MethodResult("blind", "blind", params, scores, metrics, subsets=per)


def _model(config: RunConfig):
    from pddkit.blind.baseline import BlindBaseline

    return BlindBaseline(seed=config.seed, max_texts=config.blind_max_texts)


def _out_of_fold(samples, labels: np.ndarray, config: RunConfig
                 ) -> tuple[np.ndarray, int, bool, dict]:
    """(out-of-fold scores, folds used, grouped by document, {"sample": texts fitted on or
    None, "neighbour_search": exact or approximate}) of these texts, from the cache's memo
    when it holds them; PddkitError when they are too few to cross-validate."""
    groups = _groups(samples)
    use_groups = groups is not None
    model = _model(config)
    texts = [s.text for s in samples]
    memo, key = _blind_memo(config, model, texts, labels, groups)
    found = memo.get_result("blind", key) if memo is not None else None
    if found is not None:  # the same texts, labels, groups and classifier: its scores
        meta = found[1]
        return (found[0]["scores"], meta["folds"], use_groups,
                {"sample": meta["sample"], "neighbour_search": meta["neighbour_search"]})
    scores = model.cross_val_scores(texts, labels, groups)
    how = {"sample": None if model.sample_ is None else len(model.sample_),
           "neighbour_search": model.neighbour_search_}
    if memo is not None:
        memo.put_result("blind", key, {"scores": scores}, {"folds": model.n_splits_used_, **how})
    return scores, model.n_splits_used_, use_groups, how


def _memo_holds(dataset: Dataset, config: RunConfig) -> bool:
    """Whether the cache's memo holds the pooled out-of-fold scores of these texts."""
    if not config.cache:
        return False
    samples = dataset.samples
    memo, key = _blind_memo(config, _model(config), [s.text for s in samples],
                            np.asarray(dataset.labels), _groups(samples))
    return memo.get_result("blind", key) is not None


def _inputs(dataset: Dataset) -> list[tuple]:
    """What the baseline reads of each text."""
    return [(s.id, s.text, s.label, s.group, s.subset) for s in dataset.samples]


def _groups(samples) -> list[str] | None:
    """Each text's document for grouped folds (a text without one is its own), or None
    when no text names a document."""
    if all(s.group is None for s in samples):
        return None
    return [s.group if s.group is not None else f"sample:{s.id}" for s in samples]


def _blind_memo(config: RunConfig, model, texts, labels, groups):
    """(the cache's memo, the key of these blind-baseline scores), or (None, None) without
    a cache. The key covers the texts, labels, groups, the classifier's hyperparameters and
    the pddkit and scikit-learn versions."""
    if not config.cache:
        return None, None
    from importlib.metadata import version as package_version
    from pathlib import Path

    from pddkit.cache.memo import Memo, result_key, text_digest
    from pddkit.version import __version__

    parts = {"texts": [text_digest(t) for t in texts], "labels": [int(v) for v in labels],
             "groups": None if groups is None else [str(g) for g in groups],
             "params": {k: v for k, v in vars(model).items() if not k.endswith("_")},
             "pddkit": __version__, "sklearn": package_version("scikit-learn")}
    return Memo(Path(config.cache).expanduser()), result_key("blind", 4, parts)


class _Records(logging.Handler):
    """The child's log records, sent back to the parent to be logged there."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.name, record.levelno, record.getMessage()))


def _child_main() -> None:
    """`python -m pddkit.engine.blind_job ANSWER`: (dataset, config, test_idx) pickled on
    stdin; ("ok"|"error", result or exception, log records, notices, seconds) pickled into
    the file ANSWER (written whole, then renamed)."""
    answer_path = Path(sys.argv[1])
    args = pickle.loads(sys.stdin.buffer.read())  # from our own parent process
    handler = _Records()
    root = logging.getLogger("pddkit")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
    notices: list[str] = []
    t0 = time.perf_counter()
    try:
        answer = ("ok", blind_baseline(*args, notices))
    except Exception as e:
        try:
            pickle.dumps(e)
            answer = ("error", e)
        except Exception:
            answer = ("error", RuntimeError(f"the blind baseline failed: {e!r}"))
    out = (*answer, handler.records, notices, time.perf_counter() - t0)
    tmp = answer_path.with_suffix(".tmp")
    tmp.write_bytes(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(tmp, answer_path)


if __name__ == "__main__":
    _child_main()
