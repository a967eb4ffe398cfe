"""MkDocs hook: the references that live beside what they describe (config/README.md, the
model catalog, validation/README.md) join the site under their repository paths. The docs
link them as ``../config/README.md``, which works on GitHub; on the site those links are
pointed at the borrowed page (any other link outside docs/ still fails the strict build)."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
# Repository files outside docs/ that the site shows as pages or images.
BORROWED = (
    "config/README.md",
    "config/models/README.md",
    "validation/README.md",
    "workflow/report/example-localization-metrics.png",
)


def on_files(files: Files, config) -> Files:
    for path in BORROWED:
        files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri in BORROWED:
        return markdown
    for path in BORROWED:
        markdown = markdown.replace(f"](../{path}", f"]({path}")
    return markdown
