"""Ground-truth sandbox: small causal LMs trained on texts we choose, so membership is known.
The corpus and its split (corpus.py, split.py, seeds.py, shots.py), training (training.py),
the contamination and copyright-trap experiments (contamination.py, traps.py), the checks
that members are members by construction (ground_truth.py) and the whole experiment
(experiment.py).

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources, methods, blind, evaluation, engine,
reporting, api and studies.
"""
