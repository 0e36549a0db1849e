"""Checkpoints from Python: futures saved by the object stores that hold them, read back by
numpy alone from the files (README's lines, tests/common/checkpoint/read_checkpoint.py),
loaded as futures that feed runs, and the refusals a user meets."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import atoll

from conftest import SOURCE_DIR, Cluster

sys.path.insert(0, str(SOURCE_DIR / "tests" / "common" / "checkpoint"))
from read_checkpoint import load as read_with_numpy  # noqa: E402


def files_of(cluster: Cluster, path: str) -> pathlib.Path:
    # The cluster's checkpoint root (<state dir>/checkpoints), below the client key's name.
    return pathlib.Path(cluster.state_dir) / "checkpoints" / "default" / path


def test_saved_futures_are_numpy_files_and_load_back_as_futures(cluster: Cluster,
                                                                client: atoll.Client) -> None:
    s = client.slice(2)

    @atoll.function(s, atoll.f32[4, 3].split(0))
    def double(x):
        return x * 2

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = client.run(double, x).output(0)
    client.save({"y": y, "step": np.int32(5)}, "py/one")

    directory = files_of(cluster, "py/one")
    got = read_with_numpy(str(directory))
    np.testing.assert_array_equal(got["y"], x * 2)
    assert got["step"].dtype == np.int32 and got["step"] == 5
    # Each block is a plain .npy file: here the second device's rows.
    index = json.loads((directory / "index.json").read_text())
    blocks = index["tensors"][0]["blocks"]
    assert [b["offset"] for b in blocks] == [[0, 0], [2, 0]]
    np.testing.assert_array_equal(np.load(directory / blocks[1]["file"]), (x * 2)[2:])

    loaded = client.load("py/one", s)
    assert list(loaded) == ["y", "step"]
    np.testing.assert_array_equal(loaded["y"].result(timeout=30), x * 2)
    assert loaded["step"].result(timeout=30) == 5
    np.testing.assert_array_equal(client.run(double, loaded["y"]).result(timeout=30), x * 4)

    # Onto another layout: whole, on one device.
    whole = client.load("py/one", client.slice(1), ["y"], shardings={"y": atoll.replicated})
    np.testing.assert_array_equal(whole["y"].result(timeout=30), x * 2)


def test_checkpoint_refusals(client: atoll.Client) -> None:
    s = client.slice(2)

    @atoll.function(s, atoll.f32[2].split(0))
    def inc(x):
        return x + 1

    y = client.run(inc, np.zeros(2, np.float32)).output(0)
    with pytest.raises(atoll.PermissionDenied, match="'..'"):
        client.save({"y": y}, "../elsewhere")
    with pytest.raises(atoll.InvalidArgument, match="absolute"):
        client.save({"y": y}, "/tmp/elsewhere")
    with pytest.raises(atoll.InvalidArgument, match="cannot name a tensor"):
        client.save({"a/b": y}, "py/refused")
    with pytest.raises(atoll.InvalidArgument, match="at least one future"):
        client.save({"step": np.int32(1)}, "py/refused")
    with pytest.raises(atoll.InvalidArgument):
        client.save({"y": y, "lr": 0.5}, "py/refused")  # float64: not a dtype atoll holds
    with pytest.raises(atoll.NotFound, match="no complete checkpoint"):
        client.load("py/refused", s)
    client.save({"y": y}, "py/ok")
    with pytest.raises(atoll.NotFound, match="no tensor 'z'"):
        client.load("py/ok", s, ["z"])
