"""Draw every digits-C corruption at every severity: suites/tta/digits-c.png.

One row per corruption (the 15 benchmark ones, then the 4 held out), a column for the clean
digits and one per severity, each cell showing the same few pool digits as the suite's
fixture corrupts them (same seeds). Run: ``.venv/bin/python scripts/digits_c_gallery.py
[OUT.png] [--digits N]``. With ``--source-error``, print instead the source models' error
(eval-mode BatchNorm, mean over seeds 0–4, from the suite's fixtures) on the whole pool per
corruption and severity, as a Markdown table (the suite README's).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from harness.data.digits import digits_split
from suites.tta.corruptions import ALL, HELD_OUT, corrupt
from suites.tta.source import corruption_seed

SCALE = 6  # screen pixels per digit pixel
GAP = 4
LABEL = 150
HEADER = 22


def gallery(digits: int = 3) -> Image.Image:
    _, _, x, y = digits_split()
    picks = [int(np.flatnonzero(y == c)[0]) for c in range(digits)]  # one of each class
    images = x.reshape(-1, 8, 8)
    cell = digits * 8 * SCALE + (digits - 1) * 2
    width = LABEL + 6 * (cell + GAP)
    height = HEADER + len(ALL) * (8 * SCALE + GAP) + 2 * GAP
    canvas = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default()
    for j, title in enumerate(["clean", *(f"severity {s}" for s in range(1, 6))]):
        draw.text((LABEL + j * (cell + GAP) + 4, 4), title, fill=0, font=font)
    for row, name in enumerate(ALL):
        top = HEADER + row * (8 * SCALE + GAP) + (2 * GAP if name in HELD_OUT else 0)
        label = name + (" (held out)" if name in HELD_OUT else "")
        draw.text((4, top + 8 * SCALE // 2 - 6), label, fill=0, font=font)
        for j in range(6):
            if j == 0:
                shown = images[picks]
            else:
                # the fixture's seeds: image i of corruption c is RandomState(seed(c) + i)
                shown = np.stack([corrupt(images[i:i + 1], name, j, corruption_seed(
                    list(ALL).index(name)) + i)[0] for i in picks])
            for k, img in enumerate(shown):
                tile = Image.fromarray(np.uint8(np.round((1 - img) * 255)))  # dark on light
                tile = tile.resize((8 * SCALE, 8 * SCALE), Image.Resampling.NEAREST)
                canvas.paste(tile, (LABEL + j * (cell + GAP) + k * (8 * SCALE + 2), top))
    return canvas


def source_error(seeds: range = range(5)) -> str:
    """Markdown: the source models' error (%, no adaptation) per corruption and severity."""
    import torch

    from harness.contract.registry import get_suite
    from harness.data import fixtures
    from suites.tta import model

    suite = get_suite("tta")
    images = fixtures.load(suite, "digits_c").arrays["images"]  # [19, 5, N, 64]
    _, _, x, y = digits_split()
    models = [{k: torch.from_numpy(v) for k, v in
               fixtures.load(suite, "source_model", s).arrays.items()} for s in seeds]

    def error(batch: np.ndarray) -> float:
        with torch.no_grad():
            wrong = [(model.forward("bn-mlp", p, torch.from_numpy(batch),
                                    normalization="source")[0].argmax(1).numpy() != y).mean()
                     for p in models]
        return 100 * float(np.mean(wrong))

    lines = [f"clean: {error(x):.1f}%", "",
             "| corruption | " + " | ".join(f"s{s}" for s in range(1, 6)) + " |",
             "|---|" + "---:|" * 5]
    for c, name in enumerate(ALL):
        row = [f"{error(images[c, j]):.1f}" for j in range(5)]
        label = name + (" (held out)" if name in HELD_OUT else "")
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(
        Path(__file__).resolve().parent.parent / "suites" / "tta" / "digits-c.png"))
    parser.add_argument("--digits", type=int, default=3)
    parser.add_argument("--source-error", action="store_true",
                        help="print the source models' error per corruption and severity")
    args = parser.parse_args(argv)
    if args.source_error:
        print(source_error())
        return
    gallery(args.digits).save(args.out, optimize=True)
    print(args.out)


if __name__ == "__main__":
    main()
