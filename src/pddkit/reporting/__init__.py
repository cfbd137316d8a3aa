"""Numbers -> tables and pages: one table model (table.py) rendered as terminal text,
Markdown and HTML; one page builder (page.py) for report.html and report.md; the run
report (report.py), the terminal output (terminal.py), the sandbox summary
(sandbox_summary.py) and the figures (plots.py).

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources, methods, blind, evaluation and
engine.
"""
