"""Pictures of a run and of a translation: loss, BLEU and learning rate curves of a run
directory (``mt plot``), and attention heatmaps (``mt translate --attention``, ``mt trace``).

matplotlib is the optional ``plot`` extra: only these commands import it, through
:func:`pyplot`, which names the extra in one line where it is missing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from torch import Tensor

from transformer_mt.errors import MTError
from transformer_mt.fileio import atomic_write
from transformer_mt.packages import require

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NEEDED_FOR = "drawing figures: mt plot, mt translate --attention, mt trace --figures"


def pyplot() -> ModuleType:
    """matplotlib's ``pyplot``, drawing into files only (no display needed); raises
    :class:`~transformer_mt.packages.MissingPackageError` where matplotlib is not installed.
    Commands call it before any work, so that a missing package costs no translation."""
    require({"matplotlib": NEEDED_FOR})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def read_metrics(run_dir: Path) -> tuple[list[dict], list[dict]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise MTError(f"'{path}' not found; pass a run directory written by 'mt train'")
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                raise MTError(f"'{path}', line {n}: not JSON ({exc})") from exc
    train = [r for r in records if r.get("type") == "train"]
    valid = [r for r in records if r.get("type") == "valid"]
    if not train and not valid:
        raise MTError(f"'{path}' holds no training records yet")
    return train, valid


def plot_run(run_dir: Path, out_dir: Path | None = None) -> list[Path]:
    """Write ``loss.png``, ``bleu.png`` and ``lr.png`` for a run; returns their paths."""
    plt = pyplot()
    train, valid = read_metrics(run_dir)
    out_dir = Path(out_dir or Path(run_dir) / "plots")
    if out_dir.suffix.lstrip(".").lower() in IMAGE_FORMATS and not out_dir.is_dir():
        raise MTError(f"'{out_dir}' names an image, but mt plot writes three (loss.png, "
                      "bleu.png, lr.png): give --output a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def figure(name: str, draw: Callable[[Axes], object], ylabel: str) -> None:
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
        draw(ax)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        save_figure(fig, path)
        written.append(path)

    def loss(ax: Axes) -> None:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train (smoothed CE)")
        ax.plot([r["step"] for r in valid], [r["val_loss"] for r in valid], "o-", label="val")

    figure("loss", loss, "loss per token")
    if valid:
        figure("bleu", lambda ax: ax.plot([r["step"] for r in valid],
                                          [r["val_bleu"] for r in valid], "o-",
                                          label="val BLEU"), "BLEU")
    if train:
        figure("lr", lambda ax: ax.plot([r["step"] for r in train], [r["lr"] for r in train]),
               "learning rate")
    return written


def plot_attention(weights: Tensor, rows: list[str], cols: list[str], path: Path,
                   title: str = "") -> Path:
    """Save a heatmap: one row per output token, one column per source token."""
    height = max(2.5, 0.35 * len(rows) + 1.2)
    width = max(3.0, 0.4 * len(cols) + 1.8)
    fig, ax = pyplot().subplots(figsize=(width, height), dpi=100)
    image = ax.imshow(weights.float().numpy(), cmap="viridis", aspect="auto", vmin=0.0)
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    save_figure(fig, Path(path))
    return Path(path)


IMAGE_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")


def check_image_path(path: str | Path) -> None:
    """Refuse, before any work, a path whose extension names no image format we write."""
    if Path(path).suffix.lstrip(".").lower() not in IMAGE_FORMATS:
        raise MTError(f"'{path}' is not an image name; end it in "
                      f"{', '.join('.' + f for f in IMAGE_FORMATS)}")


def save_figure(fig: Figure, path: Path) -> None:
    """Save ``fig`` as ``path`` (its extension names the format), whole or not at all."""
    check_image_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=path.suffix.lstrip(".").lower()))
    finally:
        pyplot().close(fig)
