"""Builders of small datasets in the exact upstream layouts, for tests.

- current release (c-i-ber/Nova): data/nova-v1.parquet + images/<filename>
- review-time release (Ano-2090/Nova): captions.csv, bboxes_gold.csv, bboxes_raters.csv,
  case_metadata.csv + test/<filename>
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

IMAGES = [
    # filename, case, caption, boxes [(x, y, w, h, source)] or None
    (
        "case0001_001.png",
        "case0001",
        "Axial FLAIR image shows a hyperintense mass in the right frontal lobe.",
        [(100.0, 120.0, 60.0, 40.0, "gold"), (98.0, 118.0, 64.0, 45.0, "rater1")],
    ),
    (
        "case0001_002.png",
        "case0001",
        "(1b) Coronal T1 post-contrast image shows ring enhancement.",
        [(200.0, 210.0, 30.0, 30.0, "gold"), (10.0, 20.0, 5.0, 6.0, "gold")],
    ),
    ("case0002_001.png", "case0002", "Sagittal T2 image without abnormality.", None),
    (
        "case0003_001.png",
        "case0003",
        "Axial DWI shows restricted diffusion in the left basal ganglia.",
        [(300.0, 220.0, 20.0, 18.0, "gold"), (305.0, 221.0, 16.0, 15.0, "rater2")],
    ),
]
CASES = {
    "case0001": ("45-year-old man with headaches and seizures.", "Glioblastoma"),
    "case0002": ("30-year-old woman with migraine.", "Normal study"),
    "case0003": ("70-year-old man with sudden right-sided weakness.", "Acute ischemic infarct"),
}


def png_bytes(seed: int, size: tuple[int, int] = (480, 480)) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, size=(size[1], size[0]), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def write_current(root: Path, *, meta_as_json: bool = False, images=IMAGES) -> Path:
    """The current release: rows deliberately NOT in filename order, like upstream."""
    root = Path(root)
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "images").mkdir(exist_ok=True)
    rows = []
    for i, (filename, case, caption, boxes) in enumerate(images):
        (root / "images" / filename).write_bytes(png_bytes(i))
        history, diagnosis = CASES[case]
        meta = {"clinical_history": history, "final_diagnosis": diagnosis, "age": "45"}
        rows.append(
            {
                "filename": filename,
                "case_id": case,
                "scan_id": f"scan{i}",
                "caption_text": caption,
                "image_path": f"images/{filename}",
                "meta": json.dumps(meta) if meta_as_json else meta,
                "bboxes": None
                if boxes is None
                else [
                    {"x": x, "y": y, "width": w, "height": h, "source": s}
                    for x, y, w, h, s in boxes
                ],
            }
        )
    rows = rows[::-1]  # reversed: row position must never be used to join
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, root / "data" / "nova-v1.parquet")
    return root


def write_legacy(root: Path, images=IMAGES) -> Path:
    root = Path(root)
    (root / "test").mkdir(parents=True, exist_ok=True)
    captions, gold, raters = [], [], []
    for i, (filename, case, caption, boxes) in enumerate(images):
        (root / "test" / filename).write_bytes(png_bytes(i))
        captions.append(
            {"filename": filename, "case_id": case, "scan_id": f"scan{i}", "caption": caption}
        )
        for x, y, w, h, source in boxes or []:
            if source == "gold":
                gold.append({"filename": filename, "x": x, "y": y, "width": w, "height": h})
            else:
                raters.append(
                    {"rater": source, "x": x, "y": y, "width": w, "height": h, "filename": filename}
                )
    pd.DataFrame(captions[::-1]).to_csv(root / "captions.csv", index=False)
    pd.DataFrame(gold).to_csv(root / "bboxes_gold.csv", index=False)
    pd.DataFrame(raters).to_csv(root / "bboxes_raters.csv", index=False)
    pd.DataFrame(
        [{"case_id": c, "clinical_history": h, "final_diagnosis": d} for c, (h, d) in CASES.items()]
    ).to_csv(root / "case_metadata.csv", index=False)
    return root


def build_local_dataset(folder: Path, images=IMAGES) -> Path:
    """The current-layout fixture under ``folder/repo``, built into ``folder/nova.parquet``."""
    from novabench.dataset.build import build_dataset

    root = write_current(Path(folder) / "repo", images=images)
    out = Path(folder) / "nova.parquet"
    build_dataset({"source": "local", "local_path": str(root)}, out, Path(folder) / "manifest.json")
    return out
