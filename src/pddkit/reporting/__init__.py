"""Numbers -> tables, sentences, pages and files: one table model (table.py) rendered as
terminal text, Markdown and HTML; one page builder (page.py) for report.html and report.md;
the run report (report.py), the terminal output (terminal.py), the sandbox summary
(sandbox_summary.py) and the figures (plots.py); a run's files (run_files.py: results.json,
scores.jsonl) and the sentences of the verdicts (*_text.py), the only place the numbers of
results are written into prose.

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources, methods, blind, evaluation and
engine.
"""
