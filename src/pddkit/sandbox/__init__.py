"""Ground-truth sandbox: small causal LMs trained on texts we choose, so membership is known.

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources, methods, blind, evaluation, engine,
reporting, api and studies.
"""
