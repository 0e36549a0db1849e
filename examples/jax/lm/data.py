"""The corpus: English text from Debian's `fortunes` package (/usr/share/games/fortunes,
about 2.6 MB in bookworm: quotations, jokes, definitions), read as bytes. Every tenth
fortune is held out; batches are drawn from the rest by a generator seeded with the step, so
every layout (and a resumed run) sees the same data order."""

from __future__ import annotations

import pathlib
from typing import Tuple

import numpy as np

FORTUNES = pathlib.Path("/usr/share/games/fortunes")


def corpus(directory: pathlib.Path = FORTUNES) -> Tuple[np.ndarray, np.ndarray]:
    """(train, held-out) byte arrays (uint8). The strfile index files (.dat) and the UTF-8
    twins (.u8, links to the same text) are skipped."""
    files = sorted(p for p in directory.iterdir()
                   if p.is_file() and not p.is_symlink() and p.suffix not in (".dat", ".u8"))
    if not files:
        raise FileNotFoundError(f"no fortune files in {directory}: install Debian's `fortunes` "
                                "package (scripts/setup.sh does)")
    fortunes = []
    for p in files:
        fortunes += [f.strip() + b"\n" for f in p.read_bytes().split(b"\n%\n") if f.strip()]
    train = b"".join(f for i, f in enumerate(fortunes) if i % 10 != 9)
    held = b"".join(f for i, f in enumerate(fortunes) if i % 10 == 9)
    return np.frombuffer(train, np.uint8), np.frombuffer(held, np.uint8)


def batch(text: np.ndarray, step: int, batch_size: int, context: int,
          seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``batch_size`` windows of ``context`` bytes and the bytes that follow each (int32)."""
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(text) - context - 1, size=batch_size)
    windows = np.stack([text[s:s + context + 1] for s in starts]).astype(np.int32)
    return windows[:, :-1], windows[:, 1:]
