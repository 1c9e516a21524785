#!/usr/bin/env python3
"""Build the SQLite FTS5 index that the test searx instance searches.

Walks HTML documentation trees (Debian's python3.11-doc and postgresql-doc-15 under
/usr/share/doc by default; any directory below the doc root, or an absolute path), extracts each
page's title and main text with the standard library's html.parser, and writes them to an FTS5
table:

    docs(path UNINDEXED, title, content)   tokenize = 'porter unicode61'

`path` is the page's URL path, already percent-encoded: relative to the docs root for a tree
below it (e.g. `python3.11-doc/html/library/json.html`), the absolute file path without its
leading `/` for a tree elsewhere (the test docs server mounts such a tree there). The HTTP port of the docs server is only known
when a test starts it, so the index stores no host: the searx settings written by the test
harness build the URL in SQL (`'<docs base URL>/' || path`), and the same index serves any port.

Only the standard library is used (python3's sqlite3 module ships FTS5). Usage:

    python3 tests/tools/build_docs_index.py (--out FILE | --out-dir DIR) [--if-stale | --check] \
        [--doc-root /usr/share/doc] [--tree python3.11-doc/html] [--tree postgresql-doc-15/html]

`--out-dir DIR` writes DIR/docs-index.sqlite for the default trees and
DIR/docs-index-<tree>+<tree>....sqlite for any other list (the name the test harness looks for,
`DocTrees::index_file_name` in tests/src/doc_trees.rs). `--check` builds nothing: it exits 0 when
the index is current for these trees, else 3 after saying why.

The index is written to a temporary file and renamed into place, so a reader never sees a
half-built index.
"""

from __future__ import annotations

import argparse
import html.parser
import os
import re
import sqlite3
import sys
import time
import urllib.parse

DEFAULT_DOC_ROOT = "/usr/share/doc"
DEFAULT_TREES = ("python3.11-doc/html", "postgresql-doc-15/html")
# Bump when the schema or extraction changes, so install scripts rebuild stale indexes.
INDEX_VERSION = "1"
# Pages larger than this are truncated before indexing (the biggest page here is ~1.5 MB).
MAX_PAGE_BYTES = 4 * 1024 * 1024
MAX_CONTENT_CHARS = 400_000

# Elements whose text is never page content.
SKIP_TAGS = {"script", "style", "noscript", "template", "head", "svg", "button", "form"}
# Navigation chrome of Sphinx (Python docs) and DocBook (PostgreSQL docs).
SKIP_CLASSES = {
    "related", "sphinxsidebar", "sphinxsidebarwrapper", "footer", "mobile-nav",
    "navheader", "navfooter", "headerlink", "toc-backref",
}
SKIP_ROLES = {"navigation", "search"}
# Tags after which a line break keeps words of adjacent blocks apart.
BLOCK_TAGS = {
    "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "pre", "table", "tr", "td", "th",
    "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "blockquote", "hr", "title",
}
VOID_TAGS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
    "source", "track", "wbr",
}
# Generated index pages (lists of every term with links) match nearly any query and say nothing.
SKIP_PAGES = re.compile(r"^(genindex.*|py-modindex|search|bookindex|contents)\.html$")
TITLE_SUFFIX = re.compile(r"\s+[\u2014\u2013-]+\s+Python [0-9.]+\S* documentation\s*$")


class TextExtractor(html.parser.HTMLParser):
    """Collects the <title> and the visible, non-navigation text of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title_parts: list[str] = []
        self.text_parts: list[str] = []
        self.h1_parts: list[str] = []
        self._stack: list[tuple[str, bool]] = []  # (tag, opened a skipped region)
        self._skip_depth = 0
        self._in_title = False
        self._in_h1 = False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self._in_title = True
        if tag in VOID_TAGS:
            if tag in BLOCK_TAGS and not self._skip_depth:
                self.text_parts.append("\n")
            return
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        skipped = (
            tag in SKIP_TAGS
            or bool(classes & SKIP_CLASSES)
            or (attrs.get("role") or "") in SKIP_ROLES
        )
        self._stack.append((tag, skipped))
        if skipped:
            self._skip_depth += 1
        if tag == "h1":
            self._in_h1 = True
        if tag in BLOCK_TAGS and not self._skip_depth:
            self.text_parts.append("\n")

    def handle_startendtag(self, tag, attrs):
        if tag in BLOCK_TAGS and not self._skip_depth:
            self.text_parts.append("\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if tag in VOID_TAGS:
            return
        # Pop up to the matching open tag; tolerate unclosed elements (<p>, <li> in HTML).
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                for _, skipped in self._stack[i:]:
                    if skipped:
                        self._skip_depth -= 1
                del self._stack[i:]
                break
        if tag == "h1":
            self._in_h1 = False
        if tag in BLOCK_TAGS and not self._skip_depth:
            self.text_parts.append("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title_parts.append(data)
            return
        if self._skip_depth:
            return
        self.text_parts.append(data)
        if self._in_h1:
            self.h1_parts.append(data)


def squash(text: str) -> str:
    """Collapses runs of whitespace to one space."""
    return " ".join(text.split())


def extract(raw: bytes) -> tuple[str, str]:
    """Returns (title, plain text) of one HTML page."""
    text = raw[:MAX_PAGE_BYTES].decode("utf-8", errors="replace")
    parser = TextExtractor()
    parser.feed(text)
    parser.close()
    title = squash("".join(parser.title_parts))
    title = TITLE_SUFFIX.sub("", title)
    if not title:
        title = squash("".join(parser.h1_parts))
    # Keep paragraph breaks (FTS5 ignores them; snippets read better), drop other runs.
    lines = (squash(line) for line in "".join(parser.text_parts).split("\n"))
    content = "\n".join(line for line in lines if line)
    return title, content[:MAX_CONTENT_CHARS]


def url_path(tree: str, doc_root: str) -> str:
    """A tree's URL path: below the doc root, its path there; elsewhere, its absolute path
    without the leading `/` (lexically: the tree may be a symlink, its name is what counts)."""
    path = os.path.normpath(os.path.join(doc_root, tree))
    root = os.path.normpath(doc_root)
    if path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return path.lstrip("/")


def normalise_trees(doc_root: str, trees: list[str]) -> list[str]:
    """The trees as URL paths; refuses `..`, `.` and the root itself."""
    out = []
    for tree in trees:
        parts = tree.strip().rstrip("/").split("/")
        if any(p in ("..", ".") for p in parts[1:] if p) or parts[0] in ("..", "."):
            raise SystemExit(f"error: documentation tree {tree!r} is not a plain path")
        rel = url_path(tree.strip().rstrip("/"), doc_root)
        if not rel or rel == ".":
            raise SystemExit(f"error: documentation tree {tree!r} is not a plain path")
        if rel in out:
            raise SystemExit(f"error: documentation tree {rel!r} is listed twice")
        out.append(rel)
    return out


def index_file_name(trees: list[str]) -> str:
    """docs-index.sqlite for the default trees, else one name per tree list (see --out-dir)."""
    if tuple(trees) == DEFAULT_TREES:
        return "docs-index.sqlite"
    names = [re.sub(r"[^A-Za-z0-9._-]", "_", t) for t in trees]
    return "docs-index-" + "+".join(names) + ".sqlite"


def iter_pages(doc_root: str, trees: list[str], dirs: dict[str, str]):
    """Yields (URL path, absolute path) of every .html page of the trees, sorted."""
    for tree in trees:
        top = dirs[tree]
        if not os.path.isdir(top):
            raise SystemExit(f"error: {top} is not a directory (is its package installed?)")
        found = []
        # The tree itself may be a symlink (python3.11-doc/html -> ../python3.11/html); inside
        # it, symlinks point at shared JS/CSS, never at pages, so they are not followed.
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("_"))
            for name in filenames:
                if name.endswith(".html") and not SKIP_PAGES.match(name):
                    full = os.path.join(dirpath, name)
                    if os.path.islink(full):
                        continue
                    found.append(full)
        for full in sorted(found):
            yield tree + "/" + os.path.relpath(full, top), full


def build(out: str, doc_root: str, trees: list[str], dirs: dict[str, str]) -> dict:
    started = time.monotonic()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    db = sqlite3.connect(tmp)
    try:
        db.execute(
            "CREATE VIRTUAL TABLE docs USING fts5("
            "path UNINDEXED, title, content, tokenize = 'porter unicode61')"
        )
        db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        pages = 0
        text_bytes = 0
        for rel, full in iter_pages(doc_root, trees, dirs):
            with open(full, "rb") as f:
                raw = f.read(MAX_PAGE_BYTES)
            title, content = extract(raw)
            if not content:
                continue
            url_path = urllib.parse.quote(rel.replace(os.sep, "/"))
            db.execute(
                "INSERT INTO docs(path, title, content) VALUES (?, ?, ?)",
                (url_path, title or url_path, content),
            )
            pages += 1
            text_bytes += len(content.encode("utf-8"))
        if pages == 0:
            raise SystemExit("error: no HTML pages found")
        db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
        meta = {
            "version": INDEX_VERSION,
            "doc_root": doc_root,
            "trees": ",".join(trees),
            "pages": str(pages),
            "text_bytes": str(text_bytes),
        }
        db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", meta.items())
        db.commit()
    finally:
        db.close()
    # VACUUM in a separate connection: the index is mostly written once and read many times.
    db = sqlite3.connect(tmp)
    db.execute("VACUUM")
    db.close()
    os.replace(tmp, out)
    return {
        "pages": pages,
        "text_bytes": text_bytes,
        "index_bytes": os.path.getsize(out),
        "seconds": round(time.monotonic() - started, 2),
    }


def staleness(out: str, doc_root: str, trees: list[str]) -> str | None:
    """Why `out` is not an index of this version over the same trees (None when it is)."""
    if not os.path.isfile(out):
        return "no index file"
    try:
        db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
        try:
            meta = dict(db.execute("SELECT key, value FROM meta"))
        finally:
            db.close()
    except sqlite3.Error as e:
        return f"unreadable index: {e}"
    if meta.get("version") != INDEX_VERSION:
        return f"index version {meta.get('version')}, want {INDEX_VERSION}"
    if meta.get("doc_root") != doc_root:
        return f"index of doc root {meta.get('doc_root')}, want {doc_root}"
    if meta.get("trees") != ",".join(trees):
        return f"index of trees {meta.get('trees')}, want {','.join(trees)}"
    return None


def is_current(out: str, doc_root: str, trees: list[str]) -> bool:
    """True when `out` is an index of this version over the same trees."""
    return staleness(out, doc_root, trees) is None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="index file to write")
    where.add_argument("--out-dir", help="directory to write the index into, named after the trees")
    ap.add_argument("--doc-root", default=DEFAULT_DOC_ROOT, help="root the page paths are relative to")
    ap.add_argument("--tree", action="append", dest="trees",
                    help="HTML tree relative to --doc-root, or an absolute path (repeatable)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--if-stale", action="store_true",
                      help="do nothing when the index already is a current index of the same trees")
    mode.add_argument("--check", action="store_true",
                      help="build nothing; exit 0 when the index is current, else 3")
    ap.add_argument("--print-path", action="store_true",
                    help="print the index path (with --out-dir: named after the trees) and exit")
    args = ap.parse_args(argv)
    doc_root = os.path.abspath(args.doc_root)
    trees = normalise_trees(doc_root, args.trees or list(DEFAULT_TREES))
    out = args.out or os.path.join(args.out_dir, index_file_name(trees))
    if args.print_path:
        print(out)
        return 0
    if args.check:
        why = staleness(out, doc_root, trees)
        if why is None:
            print(f"index {out} is up to date")
            return 0
        print(why)
        return 3
    if args.if_stale and is_current(out, doc_root, trees):
        print(f"index {out} is up to date")
        return 0
    dirs = {}
    for tree, spec in zip(trees, args.trees or list(DEFAULT_TREES)):
        spec = spec.strip().rstrip("/")
        dirs[tree] = os.path.join(doc_root, spec) if not os.path.isabs(spec) else spec
    stats = build(out, doc_root, trees, dirs)
    print(
        f"indexed {stats['pages']} pages ({stats['text_bytes']} bytes of text) into {out}: "
        f"{stats['index_bytes']} bytes in {stats['seconds']} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
