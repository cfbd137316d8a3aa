"""The documentation site (docs/, mkdocs.yml): the command-line page lists every command and
option click knows, the README's links lead to pages that exist, no page points at the
project's private test-data folder, and a headless browser opens two built pages.

`make test` builds the site with `mkdocs build --strict` before pytest (a broken link, a
page left out of the navigation or an object mkdocstrings cannot find fails there) and
passes its folder as PDDKIT_DOCS_SITE; without it, the slow tests build one of their own."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from browser import browser_command, chromium

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "reference" / "cli.md"


def click_commands() -> dict[str, click.Command]:
    """Command path ("pddkit traps detect") -> command, walked with click's own API."""
    from pddkit.cli.app import cli

    found: dict[str, click.Command] = {}

    def walk(cmd: click.Command, path: str) -> None:
        found[path] = cmd
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd, info_name=path.split()[-1])
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, f"{path} {name}")

    walk(cli, "pddkit")
    return found


def option_names(cmd: click.Command) -> list[str]:
    """Every flag `pddkit ... --help` shows for `cmd` (hidden options excepted)."""
    return [o for p in cmd.params if isinstance(p, click.Option) and not p.hidden
            for o in (*p.opts, *p.secondary_opts)]


def sections(page_html: str) -> dict[str, str]:
    """Heading id -> the text (tags stripped, entities decoded) up to the next heading."""
    parts = re.split(r"<h[1-6][^>]*\bid=\"([^\"]+)\"[^>]*>", page_html)
    return {parts[i]: html.unescape(re.sub(r"<[^>]+>", "", parts[i + 1]))
            for i in range(1, len(parts) - 1, 2)}


def undocumented(page_html: str) -> list[str]:
    """What click knows and the page does not: a command without its heading (the id
    mkdocs-click gives it, the command path slugified), or an option absent from its
    command's section."""
    secs = sections(page_html)
    missing = []
    for path, cmd in click_commands().items():
        sec = secs.get(path.replace(" ", "-"))
        if sec is None:
            missing.append(f"command {path}")
            continue
        missing += [f"{path} {o}" for o in option_names(cmd)
                    if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", sec)]
    return missing


def test_the_cli_page_source_lists_every_command_and_option():
    """docs/reference/cli.md as mkdocs-click resolves it (the page's own ::: block, through
    the Markdown extension the site uses) against click's list: a new command or option is
    on the page without anyone writing it there, and the test fails if the block is ever
    cut down (a depth, another command)."""
    import markdown

    page = markdown.markdown(CLI_PAGE.read_text(encoding="utf-8"),
                             extensions=["attr_list", "fenced_code", "mkdocs-click"])
    commands = click_commands()
    assert {"pddkit run", "pddkit traps detect", "pddkit cache clear"} <= set(commands)
    assert sum(len(option_names(c)) for c in commands.values()) > 200
    assert undocumented(page) == []


def test_the_cli_check_notices_a_missing_option():
    """The comparison itself: a page without one of run's options is caught."""
    import markdown

    page = markdown.markdown(CLI_PAGE.read_text(encoding="utf-8"),
                             extensions=["attr_list", "fenced_code", "mkdocs-click"])
    assert "--val-fraction" in sections(page)["pddkit-run"]
    cut = page.replace("--val-fraction", "--val-share")
    assert undocumented(cut) == ["pddkit run --val-fraction"]


def test_no_page_points_at_the_private_test_data():
    """Users have the package and this site, not the folder the tests read: papers are
    cited by title and arXiv id, and formulas are stated on the pages."""
    texts = {p: p.read_text(encoding="utf-8") for p in [*DOCS.rglob("*.md"), ROOT / "README.md"]}
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, t in texts.items()
           for m in re.finditer(r"\.\./shared\S*|shared/(papers|corpora|data)\S*|SPEC(\.md| \d|\b)", t)]
    assert bad == []


def test_readme_links_lead_to_pages_that_exist():
    """README.md is the front page on the repository host: its relative links into docs/
    must resolve (the strict build checks the site's own links)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((?!https?:|#)([^)\s#]+)(#[^)\s]*)?\)", readme)
    assert len(links) >= 10
    assert [t for t, _ in links if not (ROOT / t).exists()] == []
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert [t for t, _ in links if t.startswith("docs/") and t.endswith(".md")
            and t.removeprefix("docs/") not in nav] == []


def test_readme_is_a_front_page_starting_with_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 170
    first = re.search(r"^## (.+)$", readme, re.M)
    assert first and first.group(1) == "Start here"
    start = readme[first.end():].split("\n## ")[0]
    assert "make demo" in start and "make test" in start


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built site: `make test`'s (PDDKIT_DOCS_SITE), else one built here (strict)."""
    given = os.environ.get("PDDKIT_DOCS_SITE")
    if given:
        path = Path(given)
        path = path if path.is_absolute() else ROOT / path
        assert (path / "index.html").is_file(), f"PDDKIT_DOCS_SITE={given} holds no built site"
        return path
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_the_built_cli_page_lists_every_command_and_option(site):
    assert undocumented((site / "reference" / "cli.html").read_text(encoding="utf-8")) == []


@pytest.mark.slow
def test_the_built_api_page_renders_the_entry_points(site):
    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    for anchor in ("pddkit.api.score", "pddkit.api.evaluate", "pddkit.evaluation.results.RunResult",
                   "pddkit.engine.config.RunConfig", "pddkit.studies.audit.audit_books",
                   "pddkit.studies.compare.compare_models", "pddkit.studies.infer.infer_dataset",
                   "pddkit.studies.traps.detect.detect_traps",
                   "pddkit.evaluation.doc_classifier.DocumentClassifier"):
        assert f'id="{anchor}"' in page, anchor


@pytest.mark.slow
@pytest.mark.parametrize("page, words", [
    ("index.html", ["Start here", "make demo", "Min-K%"]),
    ("methods/minkpp.html", ["Min-K%++", "arXiv 2404.02936", "sqrt(max(M2_i - H_i^2, 1e-12))"]),
])
def test_a_browser_opens_built_pages(site, tmp_path, page, words):
    """Headless Chromium loads a built page from disk: its text is there after the
    theme's scripts ran (they turn the page's class "no-js" into "js"), and the
    navigation links to the other pages."""
    chromium()  # skipped outside CI when it is missing, a failure under CI
    cmd = browser_command(site / page, tmp_path / "profile")
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    text = html.unescape(re.sub(r"<[^>]+>", "", dom))
    for w in words:
        assert w in text, (page, w)
    root = re.search(r"<html[^>]*>", dom).group(0)  # class="no-js" as built, "js" once run
    assert re.search(r'class="[^"]*\bjs\b', root) and "no-js" not in root, root
    assert 'href="' in dom and "reference/cli.html" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*cmd[:-2], f"--screenshot={shot}", "--window-size=1200,1600",
                    (site / page).resolve().as_uri()], capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20000


@pytest.mark.slow
def test_the_built_site_searches_from_disk_without_network(site):
    """Material's offline plugin: the search index as a script (search/search_index.js,
    which a page opened from file:// can load, unlike JSON), and the Web Worker shim from
    the site itself, not unpkg.com; no page loads a script from the network."""
    index = (site / "search" / "search_index.js").read_text(encoding="utf-8")
    assert index.startswith("var __index = {") and '"location":"getting-started.html"' in index
    for page in ("index.html", "guides/score-texts.html", "reference/api.html"):
        text = (site / page).read_text(encoding="utf-8")
        scripts = re.findall(r'<script[^>]*\bsrc="([^"]+)"', text)
        shim = "../" * page.count("/") + "javascripts/iframe-worker-shim.js"
        assert shim in scripts, (page, scripts)
        assert not [s for s in scripts if re.match(r"(https?:)?//", s)], (page, scripts)
    assert (site / "javascripts" / "iframe-worker-shim.js").is_file()


@pytest.mark.slow
def test_code_blocks_wrap_instead_of_running_under_the_copy_button(site):
    css = (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    rule = re.search(r"\.md-typeset pre > code\s*\{([^}]*)\}", css).group(1)
    assert "white-space: pre-wrap" in rule and "padding-right" in rule
    page = (site / "getting-started.html").read_text(encoding="utf-8")
    assert 'href="stylesheets/extra.css"' in page


@pytest.mark.slow
def test_the_built_api_page_gives_parameters_in_tables(site):
    """score's and evaluate's parameters, each a row of a table (name, type, description,
    default), every parameter of the signature and none other."""
    import inspect

    import pddkit.api as api

    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    for name in ("score", "evaluate"):
        start = page.index(f'id="pddkit.api.{name}"')
        table = page[page.index("<table", start):page.index("</table>", start)]
        assert re.search(r"<th>\s*Name\s*</th>.*<th>\s*Description\s*</th>", table, re.S)
        rows = re.findall(r"<td>\s*<code>([a-z_]+)</code>", table)
        params = list(inspect.signature(getattr(api, name)).parameters)
        assert len(rows) == len(set(rows)) and sorted(rows) == sorted(params), name


@pytest.mark.slow
def test_a_browser_searches_the_site_opened_from_disk(site, tmp_path):
    """Headless Chromium opens index.html?q=sandbox from file://: the search results
    (computed by the search worker, through the shim) list pages."""
    chromium()  # skipped outside CI when it is missing, a failure under CI
    cmd = browser_command(site / "index.html", tmp_path / "profile")
    cmd[-1] += "?q=sandbox"
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    results = re.findall(r'class="md-search-result__item"', dom)
    assert len(results) >= 3, dom[-3000:]
    assert "guides/sandbox.html" in dom
