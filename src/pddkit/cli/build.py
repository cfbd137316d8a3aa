"""`pddkit build NAME`: a benchmark built from local files -> OUTPUT/data.jsonl + manifest.json."""

from __future__ import annotations

import json

import click

from pddkit.cli import options
from pddkit.cli.app import cli


@cli.command(short_help="Build a benchmark: labelled JSONL and a manifest.")
@options.apply(options.BUILD_OPTIONS)
def build(builder, members, nonmembers, inputs, words, member_before, nonmember_after,
          date_field, member_date_field, nonmember_date_field, text_field, snippet, language,
          seed, output, overwrite, index, index_tokenizer, index_n, max_overlap) -> None:
    """Build benchmark BUILDER (see `pddkit list`) into OUTPUT/data.jsonl, with a
    manifest.json of its sources (sha256), parameters, seed and counts."""
    from pddkit.data.builders import build as run_builder

    options.check_index_flags(index)
    given = {"members": members or None, "nonmembers": nonmembers or None,
             "inputs": inputs or None, "words": words, "member_before": member_before,
             "nonmember_after": nonmember_after, "date_field": date_field,
             "member_date_field": member_date_field,
             "nonmember_date_field": nonmember_date_field, "text_field": text_field,
             "snippet": snippet,
             "language": language, "seed": seed}
    if index or index_tokenizer is not None:  # else the build's parameters are as before
        given |= {"index": index, "index_tokenizer": index_tokenizer, "index_n": index_n,
                  "max_overlap": max_overlap}
    out = run_builder(builder, output, overwrite=overwrite,
                      **{k: v for k, v in given.items() if v is not None})
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    data = manifest["files"]["data.jsonl"]
    click.echo(f"{builder}: {data['rows']} texts ({data['members']} members, "
               f"{data['nonmembers']} non-members) from {len(manifest['sources'])} files")
    per_subset: dict[str, list[int]] = {}
    for line in (out / "data.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        per_subset.setdefault(row["subset"], [0, 0])[1 - row["label"]] += 1
    for subset, (m, n) in per_subset.items():
        click.echo(f"  {subset:<12} {m:>6} members  {n:>6} non-members")
    skipped = manifest["counts"].get("skipped_too_short")
    if skipped and any(skipped.values()):
        click.echo("  books shorter than one segment, skipped: "
                   + ", ".join(f"{v} at {k} words" for k, v in skipped.items()))
    check = manifest["counts"].get("corpus_check")
    if check is not None:
        short = (f"; {check['nonmembers_too_short']} shorter than {check['n']} tokens kept "
                 "unchecked" if check["nonmembers_too_short"] else "")
        click.echo(f"  non-members the corpus contains, dropped: {check['nonmembers_dropped']} of "
                   f"{check['nonmembers_checked']} checked (at least {check['max_overlap']:g} of "
                   f"their {check['n']}-grams found in index {', '.join(check['index'])}, "
                   f"tokenizer {check['tokenizer']}){short}")
    lang = "" if manifest["language"] == "en" else f" --language {manifest['language']}"
    click.echo(f"data: {out / 'data.jsonl'}, manifest: {out / 'manifest.json'}")
    click.echo(f"score it: pddkit run --model MODEL --data {out / 'data.jsonl'}{lang} "
               "--output RESULTS")
