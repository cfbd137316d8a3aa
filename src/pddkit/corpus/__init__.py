"""Training-corpus indexes: infini-gram suffix-array indexes of a model's training corpus,
and per-text overlap with it (the share of a text's n-grams the corpus holds, its longest
match, the count of the whole text).

documents.py reads corpus files into documents; normalize.py is the one text normaliser
applied identically when indexing and when checking; layout.py is the index folder's
format (files, manifest, checks); build.py tokenizes and builds the suffix arrays;
index.py opens an index; overlap.py measures texts against it.

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache and backends.
"""
