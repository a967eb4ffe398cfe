"""Small previews of the report's figures for the leaderboard, embedded as ``data:`` URIs
so that the page stays one file that opens offline (the figures themselves are linked).

Downscaled with Pillow to a fixed width (1.5 times the width shown) and stored as a
64-colour PNG: a plot's flat colours and text survive the palette (a lossy format blurs
the text), and a preview costs about 15 kB where the figure costs up to a few MB (the
sample run's 19 figures: 290 kB of previews; 256 colours: 410 kB). The same figure gives
the same bytes, so an unchanged figure leaves the page unchanged.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

THUMBNAIL_WIDTH = 360  # pixels; the page shows it 240 CSS pixels wide
COLOURS = 64
# A tall figure is shrunk to fit at most this many widths high.
MAX_ASPECT = 3


@dataclass(frozen=True)
class Thumbnail:
    uri: str  # data:image/png;base64,...
    width: int
    height: int


def thumbnail(path: Path, width: int = THUMBNAIL_WIDTH) -> Thumbnail | None:
    """The preview of the image at ``path``; None where it is missing or no readable image
    (the page then links the figure without a preview)."""
    try:
        with Image.open(path) as image:
            image.thumbnail((width, width * MAX_ASPECT), Image.Resampling.LANCZOS)
            preview = _flatten(image).quantize(COLOURS)
    except (OSError, ValueError, Image.DecompressionBombError, SyntaxError):
        return None
    buffer = io.BytesIO()
    preview.save(buffer, format="PNG", optimize=True)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return Thumbnail(f"data:image/png;base64,{encoded}", preview.width, preview.height)


def _flatten(image: Image.Image) -> Image.Image:
    """RGB on white: figures are drawn on white, and a palette needs no alpha."""
    rgba = image.convert("RGBA")
    canvas = Image.new("RGBA", rgba.size, "white")
    return Image.alpha_composite(canvas, rgba).convert("RGB")
