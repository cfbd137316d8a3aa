"""One page builder for every report: a Page is a title and a list of blocks (summary
lines, notice boxes, tables, images, links, a configuration block); it renders to a
self-contained report.html (images inlined as base64 PNG, no external scripts or fonts)
and to report.md (the PNG files written beside it)."""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass
from pathlib import Path

from pddkit.reporting.table import Table, to_html, to_markdown

CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;
max-width:1100px;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}td:first-child,th:first-child
{text-align:left}tr.baseline td{color:#666;font-style:italic}.best{font-weight:bold;
background:#e6f4ea}.warn{background:#fdecea;border-left:4px solid #d93025;padding:.6em 1em}
.ok{background:#e6f4ea;border-left:4px solid #188038;padding:.6em 1em}img{max-width:100%}
#run-summary{list-style:none;padding:0}#run-summary li{margin:.2em 0}
pre{background:#f6f8fa;padding:1em;overflow:auto;font-size:12px}"""

# lets a headless browser report how many images actually decoded (used by the tests)
CHECK = ("<script>window.addEventListener('load',function(){var i=[].slice.call(document.images);"
         "document.body.setAttribute('data-images-decoded',i.filter(function(x){return x.complete"
         "&&x.naturalWidth>0}).length+'/'+i.length)})</script>")

BOXES = ("warn", "ok")  # notice kinds drawn as a coloured box (a quote in Markdown)


@dataclass(frozen=True)
class Summary:
    """'key: value' lines at the top of a page (<ul id='run-summary'>)."""

    items: tuple[tuple[str, str], ...]
    id: str = "run-summary"


@dataclass(frozen=True)
class Notice:
    """A paragraph: `lead` in bold, then `lines` (one per line in HTML, '; ' in Markdown).
    kind 'warn' / 'ok' draws a box (a quote in Markdown; bold throughout when 'warn' has no
    lead), any other kind is only a class name ('verified')."""

    lines: tuple[str, ...]
    kind: str = ""
    id: str = ""
    lead: str = ""


@dataclass(frozen=True)
class Image:
    """A PNG under its caption: inlined in HTML, `filename` beside report.md."""

    caption: str
    filename: str
    png: bytes


@dataclass(frozen=True)
class Links:
    """A titled list of (text, relative href) links."""

    title: str
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Config:
    """The configuration section: notices (e.g. the statistics cache line), then `data` as
    JSON in a <pre> block, then `provenance` (results.json's, pddkit/provenance.py) in a
    collapsed <details> section."""

    data: dict
    notices: tuple[Notice, ...] = ()
    title: str = "Configuration"
    provenance: dict | None = None


Block = Summary | Notice | Table | Image | Links | Config


@dataclass(frozen=True)
class Page:
    title: str
    blocks: tuple[Block, ...]


def _attrs(**kv: str) -> str:
    return "".join(f" {k}='{html.escape(v)}'" for k, v in kv.items() if v)


def _notice_html(n: Notice) -> str:
    e = html.escape
    lead = f"<b>{e(n.lead)}</b>" + (" " if n.lines else "") if n.lead else ""
    return (f"<p{_attrs(**{'class': n.kind, 'id': n.id})}>{lead}"
            + "<br>".join(e(t) for t in n.lines) + "</p>")


def _block_html(b: Block) -> str:
    e = html.escape
    if isinstance(b, Table):
        return to_html(b)
    if isinstance(b, Summary):
        return (f"<ul{_attrs(id=b.id)}>\n" + "\n".join(
            f"<li><b>{e(k)}</b>: {e(v)}</li>" for k, v in b.items) + "\n</ul>")
    if isinstance(b, Notice):
        return _notice_html(b)
    if isinstance(b, Image):
        data = base64.b64encode(b.png).decode("ascii")
        return (f"<h2>{e(b.caption)}</h2><img alt='{e(b.caption)}' "
                f"src='data:image/png;base64,{data}'>")
    if isinstance(b, Links):
        return (f"<h2>{e(b.title)}</h2><ul>" + "".join(
            f"<li><a href='{e(href)}'>{e(text)}</a></li>" for text, href in b.items) + "</ul>")
    if isinstance(b, Config):
        return "\n".join([f"<h2>{e(b.title)}</h2>", *map(_notice_html, b.notices),
                          f"<pre>{e(json.dumps(b.data, indent=2))}</pre>",
                          *_provenance_html(b.provenance)])
    raise TypeError(f"not a page block: {type(b).__name__}")


def provenance_line(prov: dict) -> str:
    """One line: pddkit version and commit, Python and torch, devices, when it ran."""
    git = prov.get("git") or {}
    commit = (f"commit {git['commit'][:12]}" + (" with uncommitted changes" if git.get("dirty")
                                                else "")) if git.get("commit") else "no git commit"
    libs = prov.get("libraries") or {}
    devices = ", ".join(d.get("name") or d.get("device", "?") for d in prov.get("devices") or [])
    return (f"pddkit {prov.get('pddkit_version', '?')} ({commit}); Python {prov.get('python')}"
            + (f", torch {libs['torch']}" if libs.get("torch") else "") + f"; on {devices}; "
            f"{prov.get('started_at')} to {prov.get('finished_at')}")


def _provenance_html(prov: dict | None) -> list[str]:
    if not prov:
        return []
    e = html.escape
    return [f"<details id='provenance'><summary>Provenance: {e(provenance_line(prov))}</summary>"
            f"<pre>{e(json.dumps(prov, indent=2))}</pre></details>"]


def _provenance_md(prov: dict | None) -> list[str]:
    if not prov:
        return []
    return ["", "<details><summary>Provenance</summary>", "", f"{provenance_line(prov)}", "",
            "```json", json.dumps(prov, indent=2), "```", "", "</details>"]


def to_page_html(page: Page) -> str:
    """The whole report.html: one file, nothing fetched."""
    e = html.escape
    return "\n".join([
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(page.title)}</title>",
        f"<style>{CSS}</style></head><body><h1>{e(page.title)}</h1>",
        *map(_block_html, page.blocks), CHECK + "</body></html>"])


def _notice_md(n: Notice) -> str:
    body = "; ".join(n.lines)
    if n.lead:
        text = f"**{n.lead}**" + (f" {body}" if body else "")
    else:
        text = f"**{body}**" if n.kind == "warn" else body
    return ("> " if n.kind in BOXES else "") + text


def _block_md(b: Block) -> list[str]:
    if isinstance(b, Table):
        return to_markdown(b)
    if isinstance(b, Summary):
        return [f"- **{k}**: {v}" for k, v in b.items]
    if isinstance(b, Notice):
        return [_notice_md(b)]
    if isinstance(b, Image):
        return [f"## {b.caption}", "", f"![{b.caption}]({b.filename})"]
    if isinstance(b, Links):
        return [f"## {b.title}", "", *(f"- [{text}]({href})" for text, href in b.items)]
    if isinstance(b, Config):
        return [f"## {b.title}", "", *(x for n in b.notices for x in (_notice_md(n), "")),
                "```json", json.dumps(b.data, indent=2), "```", *_provenance_md(b.provenance)]
    raise TypeError(f"not a page block: {type(b).__name__}")


def to_page_markdown(page: Page) -> str:
    """The whole report.md; images refer to PNG files beside it."""
    lines = [f"# {page.title}", ""]
    for b in page.blocks:
        lines += [*_block_md(b), ""]
    return "\n".join(lines)


def write_page(page: Page, out_dir: str | Path, stem: str = "report") -> tuple[Path, Path]:
    """Write the page's PNGs, `stem`.html and `stem`.md into `out_dir`; returns both paths."""
    out = Path(out_dir)
    for b in page.blocks:
        if isinstance(b, Image):
            (out / b.filename).write_bytes(b.png)
    html_path, md_path = out / f"{stem}.html", out / f"{stem}.md"
    html_path.write_text(to_page_html(page))
    md_path.write_text(to_page_markdown(page))
    return html_path, md_path
