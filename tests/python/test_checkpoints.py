"""Checkpoints from Python: futures saved by the object stores that hold them, read back by
numpy alone from the files (README's lines, tests/common/checkpoint/read_checkpoint.py),
loaded as futures that feed runs, and the refusals a user meets."""

from __future__ import annotations

import json
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import atoll
from atoll import ops

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


@pytest.mark.parametrize("dtype,descr", [(atoll.f16, "<f2"), (atoll.f64, "<f8"),
                                         (atoll.i64, "<i8"), (atoll.i32, "<i4"),
                                         (atoll.f32, "<f4")])
def test_every_numpy_dtype_saves_and_loads_as_itself(cluster: Cluster, client: atoll.Client,
                                                     dtype: atoll.DType, descr: str) -> None:
    s = client.slice(2)

    @atoll.function(s, dtype[4, 3].split(0))
    def twice(x):
        return x + x

    x = (np.arange(12) - 5).reshape(4, 3).astype(dtype.numpy)
    if dtype == atoll.i64:
        x += 2**61  # beyond a double's 53 bits
    y = client.run(twice, x).output(0)
    path = f"py/dtype-{dtype.name}"
    client.save({"y": y, "x": x}, path)
    got = read_with_numpy(str(files_of(cluster, path)))
    assert got["y"].dtype.str == descr and got["x"].dtype.str == descr
    np.testing.assert_array_equal(got["y"], x + x)
    np.testing.assert_array_equal(got["x"], x)
    loaded = client.load(path, s)
    assert loaded["y"].dtype == dtype
    out = loaded["y"].result(timeout=30)
    assert out.dtype == np.dtype(dtype.numpy)
    np.testing.assert_array_equal(out, x + x)


def test_bf16_files_say_bfloat16_and_numpy_reads_them(cluster: Cluster,
                                                       client: atoll.Client) -> None:
    s = client.slice(2)

    @atoll.function(s, atoll.f32[4].split(0))
    def to_bf16(x):
        return ops.cast(x, atoll.bf16)

    x = np.random.default_rng(3).standard_normal(4).astype(np.float32) * 100
    rounded = x.astype(ml_dtypes.bfloat16)  # the oracle of the rounding
    client.save({"w": client.run(to_bf16, x).output(0)}, "py/bf16")
    directory = files_of(cluster, "py/bf16")
    index = json.loads((directory / "index.json").read_text())
    assert (index["tensors"][0]["dtype"], index["tensors"][0]["descr"]) == ("bf16", "bfloat16")
    block = np.load(directory / index["tensors"][0]["blocks"][0]["file"])
    assert block.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(block.view(np.uint16), rounded[:2].view(np.uint16))
    read = read_with_numpy(str(directory))["w"]
    np.testing.assert_array_equal(np.asarray(read, np.float32), rounded.astype(np.float32))
    loaded = client.load("py/bf16", s)
    assert loaded["w"].dtype == atoll.bf16
    np.testing.assert_array_equal(loaded["w"].result(timeout=30).view(np.uint16),
                                  rounded.view(np.uint16))
    # A bf16 array saved from the client is the same file.
    client.save({"w": rounded, "f": loaded["w"]}, "py/bf16_array")
    again = client.load("py/bf16_array", s, ["w"])["w"].result(timeout=30)
    np.testing.assert_array_equal(again.view(np.uint16), rounded.view(np.uint16))


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
        client.save({"y": y, "lr": 0.5j}, "py/refused")  # complex: not a dtype atoll holds
    with pytest.raises(atoll.NotFound, match="no complete checkpoint"):
        client.load("py/refused", s)
    client.save({"y": y}, "py/ok")
    with pytest.raises(atoll.NotFound, match="no tensor 'z'"):
        client.load("py/ok", s, ["z"])
