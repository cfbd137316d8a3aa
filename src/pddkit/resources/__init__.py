"""What methods read besides the target's statistics: frequency tables (DC-PDD),
neighbour texts (Mattern et al.), the white-box probe (Liu et al.).

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus and data.builders.
"""
