"""Hand-edited datasets in the upstream layout: images from outside the folder, links that
loop, decompression bombs, huge captions and row counts. Each stops the build with one
line naming the row (or file) and the fix, and leaves the previous dataset byte for byte."""

from __future__ import annotations

import io
import struct
import time
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from novabench.dataset.build import build_dataset
from novabench.dataset.fingerprint import folder_listing, source_fingerprint
from novabench.errors import DatasetError
from upstream import IMAGES, png_bytes, write_current, write_legacy


def build(tmp_path, root, **extra):
    out = tmp_path / "out"
    cfg = {"source": "local", "local_path": str(root), **extra}
    return build_dataset(
        cfg, out / "nova.parquet", out / "manifest.json", cache_dir=tmp_path / "cache"
    )


def failure(tmp_path, root, **extra) -> str:
    with pytest.raises(DatasetError) as err:
        build(tmp_path, root, **extra)
    message = str(err.value)
    assert "\n" not in message
    return message


def rewrite_rows(root, change):
    path = root / "data" / "nova-v1.parquet"
    rows = pq.read_table(path).to_pylist()
    change({row["filename"]: row for row in rows})
    pq.write_table(pa.Table.from_pylist(rows), path)


def outside_image(tmp_path):
    """An image in a folder beside the dataset, which no row may read."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "case0003_001.png").write_bytes(png_bytes(99))
    return folder / "case0003_001.png"


def test_an_absolute_image_path_outside_the_folder_is_refused(tmp_path):
    root = write_current(tmp_path / "repo")
    elsewhere = outside_image(tmp_path)

    def change(rows):
        rows["case0003_001.png"]["image_path"] = str(elsewhere)

    rewrite_rows(root, change)
    message = failure(tmp_path, root)
    assert message.startswith(
        f"image_path '{elsewhere}' of row 'case0003_001.png' points outside the dataset folder"
    )
    assert "fix: give every image_path relative to the dataset folder" in message


def test_dot_dot_in_image_path_is_refused(tmp_path):
    root = write_current(tmp_path / "repo")
    outside_image(tmp_path)

    def change(rows):
        rows["case0003_001.png"]["image_path"] = "images/../../outside/case0003_001.png"

    rewrite_rows(root, change)
    assert "points outside the dataset folder" in failure(tmp_path, root)


def test_a_filename_that_is_a_path_is_refused(tmp_path):
    root = write_current(tmp_path / "repo")
    outside_image(tmp_path)

    def change(rows):
        row = rows["case0003_001.png"]
        row["filename"], row["image_path"] = "../../outside/case0003_001.png", None

    rewrite_rows(root, change)
    assert failure(tmp_path, root) == (
        "filename '../../outside/case0003_001.png' of a row is a path, not a file name; "
        "fix: give each row the image's file name only (e.g. case0001_001.png); its folder "
        "belongs in image_path"
    )


def test_an_image_linked_out_of_the_folder_is_refused_and_one_inside_is_read(tmp_path):
    root = write_current(tmp_path / "repo")
    link = root / "images" / "case0003_001.png"
    # A link to another file of the folder is harmless.
    (root / "spare.png").write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(root / "spare.png")
    assert build(tmp_path, root)["n_images"] == len(IMAGES)

    link.unlink()
    link.symlink_to(outside_image(tmp_path))
    message = failure(tmp_path, root)
    assert message.startswith(
        "image_path 'images/case0003_001.png' of row 'case0003_001.png' points outside"
    )
    assert str(tmp_path / "outside" / "case0003_001.png") in message


def test_the_legacy_layout_refuses_a_linked_image_too(tmp_path):
    root = write_legacy(tmp_path / "repo")
    link = root / "test" / "case0001_002.png"
    link.unlink()
    link.symlink_to(outside_image(tmp_path))
    assert "of row 'case0001_002.png' points outside" in failure(tmp_path, root)


def test_directory_links_that_loop_or_reach_root_are_listed_not_followed(tmp_path):
    root = write_current(tmp_path / "repo")
    (root / "images" / "loop").symlink_to("..")
    (root / "everything").symlink_to("/")
    started = time.monotonic()
    listing = folder_listing(root)
    assert time.monotonic() - started < 5
    assert ["everything", "link", "/", None] in listing
    assert ["images/loop", "link", "..", None] in listing
    assert len(listing) == len(IMAGES) + 3  # the images, the metadata and the two links
    fingerprint = source_fingerprint({"source": "local", "local_path": str(root)})
    # Re-pointing a link is a change of the source.
    (root / "everything").unlink()
    (root / "everything").symlink_to("/tmp")
    assert source_fingerprint({"source": "local", "local_path": str(root)}) != fingerprint
    assert build(tmp_path, root)["n_images"] == len(IMAGES)


def test_an_image_path_through_a_link_loop_is_one_line(tmp_path):
    root = write_current(tmp_path / "repo")
    (root / "images" / "self").symlink_to("self")

    def change(rows):
        rows["case0002_001.png"]["image_path"] = "images/self/case0002_001.png"

    rewrite_rows(root, change)
    message = failure(tmp_path, root)
    assert message.startswith(
        "image_path 'images/self/case0002_001.png' of row 'case0002_001.png' cannot be resolved"
    )
    assert message.endswith("fix: remove the link loop from the dataset folder, or re-download it")


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG signature and header that claims ``width`` x ``height``: Pillow reads the
    size before any pixel, so a 30000x30000 bomb needs no 900 MB to make."""
    small = io.BytesIO()
    Image.new("L", (1, 1)).save(small, format="PNG")
    data = bytearray(small.getvalue())
    ihdr = bytes(data[12:16]) + struct.pack(">II", width, height) + bytes(data[24:29])
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(ihdr))
    return bytes(data)


@pytest.mark.parametrize("side", [30000, 10000])  # past Pillow's error and warning limits
def test_a_decompression_bomb_names_the_file_and_the_limit(tmp_path, side):
    root = write_current(tmp_path / "repo")
    (root / "images" / "case0002_001.png").write_bytes(png_header_only(side, side))
    assert failure(tmp_path, root) == (
        f"image images/case0002_001.png of case0002_001.png has {side * side} pixels, more "
        f"than the {Image.MAX_IMAGE_PIXELS} Pillow decodes (a possible decompression "
        "bomb); fix: replace it with the real slice (NOVA's are 480x480) or drop its row"
    )


def test_more_rows_than_max_images_stop_before_reading_and_leave_no_cache(tmp_path):
    root = write_current(tmp_path / "repo")
    message = failure(tmp_path, root, max_images=3)
    assert message == (
        f"{root / 'data' / 'nova-v1.parquet'} lists 4 images, more than dataset.max_images "
        "(3); NOVA has 906; fix: check that dataset.local_path is a NOVA download, or raise "
        "dataset.max_images (the dataset job needs about 0.5 GiB of memory per 1,000 images)"
    )
    assert "lists 4 images" in failure(tmp_path, write_legacy(tmp_path / "old"), max_images=3)
    build(tmp_path, root, max_images=4)
    # The Arrow copy of the metadata that `datasets` prepares is not left behind.
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("field", ["caption_text", "clinical_history"])
def test_a_caption_or_history_past_max_text_chars_is_refused(tmp_path, field):
    root = write_current(tmp_path / "repo")

    def change(rows):
        row = rows["case0001_002.png"]
        if field == "caption_text":
            row["caption_text"] = "x" * 101
        else:
            row["meta"] = {**row["meta"], "clinical_history": "y" * 101}

    rewrite_rows(root, change)
    name = {"caption_text": "caption"}.get(field, field)
    assert failure(tmp_path, root, max_text_chars=100) == (
        f"{name} of case0001_002.png is 101 characters long, more than "
        f"dataset.max_text_chars (100); fix: shorten that {name} in the metadata, or raise "
        "dataset.max_text_chars"
    )
    assert build(tmp_path, root, max_text_chars=101)["n_images"] == len(IMAGES)


def test_each_hostile_build_leaves_the_previous_dataset_byte_for_byte(tmp_path):
    root = write_current(tmp_path / "repo")
    build(tmp_path, root)
    out = tmp_path / "out"
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    link = root / "images" / "case0001_001.png"
    link.unlink()
    link.symlink_to(outside_image(tmp_path))
    failure(tmp_path, root)
    link.unlink()
    link.write_bytes(png_header_only(30000, 30000))
    failure(tmp_path, root)
    failure(tmp_path, root, max_images=1)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before


def test_a_full_disk_during_the_build_is_one_line_and_keeps_the_dataset(tmp_path):
    from novabench.errors import NovaError

    root = write_current(tmp_path / "repo")
    build(tmp_path, root)
    out = tmp_path / "out"
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (out / "manifest.json.tmp").symlink_to("/dev/full")
    with pytest.raises(NovaError) as err:
        build(tmp_path, root, clip_boxes=True)
    assert str(err.value).startswith(f"no space left on the device of {out} (")
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert not (out / "manifest.json.tmp").is_symlink()
