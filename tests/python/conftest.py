"""The Python package's tests, against real clusters: each started as a user starts one,
with `atoll up` (config/test.toml: the services as processes on loopback, every RM port
chosen freely), in a state dir of its own, and stopped with `atoll down`.

Run by ctest (tests/python/CMakeLists.txt), or by hand after a build:
    PYTHONPATH=build/python .venv/bin/python -m pytest tests/python
ATOLL_BIN_DIR (default build/bin) names the binaries.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Iterator

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("ATOLL_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BIN_DIR = pathlib.Path(os.environ.get("ATOLL_BIN_DIR", SOURCE_DIR / "build" / "bin"))
if "ATOLL_PYTHON_DIR" in os.environ:
    sys.path.insert(0, os.environ["ATOLL_PYTHON_DIR"])
sys.path.insert(0, str(SOURCE_DIR / "examples" / "python"))

import atoll  # noqa: E402


class Cluster:
    """A cluster started with `atoll up` in a temporary state dir."""

    def __init__(self, config: pathlib.Path) -> None:
        self.state_dir = tempfile.mkdtemp(prefix="atoll-pytest-")
        self.config = config
        self.bin_dir = BIN_DIR
        self.source_dir = SOURCE_DIR
        self.up = False

    def atoll(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN_DIR / "atoll"), *args, "--state-dir", self.state_dir],
                              capture_output=True, text=True, timeout=120)

    def start(self) -> "Cluster":
        up = self.atoll("up", "--config", str(self.config), "--bin-dir", str(BIN_DIR))
        if up.returncode != 0:
            raise RuntimeError(f"atoll up failed: {up.stdout}{up.stderr}")
        self.up = True
        return self

    def stop(self) -> None:
        if self.up:
            down = self.atoll("down")
            self.up = False
            assert down.returncode == 0, down.stdout + down.stderr

    def connect(self, **options) -> atoll.Client:
        return atoll.connect(state_dir=self.state_dir, **options)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The suite's cluster: 2 islands x 2 hosts x 2 cpu devices, CURVE on."""
    c = Cluster(SOURCE_DIR / "config" / "test.toml")
    try:
        yield c.start()
    finally:
        c.remove()


@pytest.fixture()
def small_cluster() -> Iterator[Cluster]:
    """A cluster of its own for one test (one host of 2 devices), which it may stop."""
    c = Cluster(SOURCE_DIR / "tests" / "python" / "one_host.toml")
    try:
        yield c.start()
    finally:
        c.remove()


@pytest.fixture()
def client(cluster: Cluster) -> Iterator[atoll.Client]:
    with cluster.connect(name="pytest") as c:
        yield c
