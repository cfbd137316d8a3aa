"""The engine: plans the passes the requested methods need (plan.py), runs one provider
per need through a backend (passes.py, executors.py), turns the passes into observations
and method scores (score.py), and, for labelled data, hands the scores to evaluation/
(run.py). Backends (pddkit.backends) know models; methods (pddkit.methods) know formulas;
the engine is the only place that knows both."""
