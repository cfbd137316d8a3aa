"""The blind baseline (Das et al. 2024): a classifier that sees the texts alone, no model,
fitted out of fold; when it separates members from non-members, the data set's members
and non-members differ in distribution and a detector's AUC says little about the model.

baseline.py is the classifier (BlindBaseline: counts, dates, style, neighbours, greedy
words, stacked); counts.py, features.py, folds.py, greedy.py and neighbours.py are its
parts; requirements.py says what texts it needs (read before it starts, without scipy);
verdict.py is the rule that says whether its AUC is above chance (a BlindVerdict:
numbers and an outcome; reporting/blind_verdict_text.py writes its sentence). The engine runs it
inside a run (engine/blind_job.py) or alone (`pddkit blind`, engine/blind_run.py).

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources and methods.
"""
