"""Figure previews for the leaderboard: size, colours, same bytes each time, and None for
what is no image."""

from __future__ import annotations

import base64
import io

from PIL import Image

from novabench.report.thumbnails import THUMBNAIL_WIDTH, thumbnail


def _decoded(uri: str) -> Image.Image:
    assert uri.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))


def test_a_figure_is_shrunk_to_the_width_and_drawn_on_white(tmp_path):
    figure = Image.new("RGBA", (2160, 1080), (0, 0, 0, 0))  # transparent, as savefig may
    figure.paste((213, 94, 0, 255), (0, 0, 1080, 1080))
    figure.save(tmp_path / "f.png")
    preview = thumbnail(tmp_path / "f.png")
    assert (preview.width, preview.height) == (THUMBNAIL_WIDTH, THUMBNAIL_WIDTH // 2)
    image = _decoded(preview.uri).convert("RGB")
    assert image.size == (preview.width, preview.height)
    assert image.getpixel((10, 10)) == (213, 94, 0)
    assert image.getpixel((THUMBNAIL_WIDTH - 10, 10)) == (255, 255, 255)
    assert thumbnail(tmp_path / "f.png") == preview  # same figure, same bytes


def test_a_tall_figure_fits_three_widths_and_a_small_one_is_not_enlarged(tmp_path):
    Image.new("RGB", (1000, 10_000), "white").save(tmp_path / "tall.png")
    Image.new("RGB", (100, 50), "white").save(tmp_path / "small.png")
    tall, small = thumbnail(tmp_path / "tall.png"), thumbnail(tmp_path / "small.png")
    assert tall.height == 3 * THUMBNAIL_WIDTH and tall.width < THUMBNAIL_WIDTH
    assert (small.width, small.height) == (100, 50)


def test_no_preview_of_what_is_no_image(tmp_path):
    (tmp_path / "cut.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "text.png").write_text("not an image")
    assert thumbnail(tmp_path / "cut.png") is None
    assert thumbnail(tmp_path / "text.png") is None
    assert thumbnail(tmp_path / "absent.png") is None
