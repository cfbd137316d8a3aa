"""The engine: plans the passes the requested methods need (plan.py), runs one provider
per need through a backend (passes.py; pass_context.py is what the passes share;
executors.py), turns the passes into observations and method scores (score.py), and, for
labelled data, hands the scores to evaluation/ (run.py). Backends (pddkit.backends) know
models; methods (pddkit.methods) know formulas; the engine is the only place that knows
both. The blind baseline runs inside a run (blind_job.py) or alone (blind_run.py).

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources, methods, blind and evaluation.
"""
