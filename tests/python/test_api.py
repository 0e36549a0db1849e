"""The package's surface, without a cluster: the type stubs name exactly what the extension
has, every status code has its exception class, and types print as they are written."""

from __future__ import annotations

import ast
import pathlib

import atoll
from atoll import _atoll

PACKAGE = pathlib.Path(atoll.__file__).parent


def stub_names(stub: str) -> set:
    tree = ast.parse((PACKAGE / stub).read_text())
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def public(module) -> set:
    return {name for name in dir(module) if not name.startswith("_")}


def test_ops_stub_names_every_op() -> None:
    assert stub_names("ops.pyi") == public(_atoll.ops)
    for name in ("gelu", "sigmoid", "cross_entropy", "all_reduce_sum", "top_k"):
        assert callable(getattr(atoll.ops, name))


def test_extension_stub_names_everything() -> None:
    assert stub_names("_atoll.pyi") == public(_atoll) - {"ops"}


def test_every_status_code_has_its_class() -> None:
    codes = ["InvalidArgument", "NotFound", "OutOfMemory", "Unavailable", "DeadlineExceeded",
             "Cancelled", "FailedPrecondition", "Internal", "PermissionDenied",
             "ResourceExhausted"]
    for code in codes:
        cls = getattr(atoll, code)
        assert issubclass(cls, atoll.Error) and cls.code == code
        assert f"atoll.{code}" == f"{cls.__module__}.{cls.__name__}"
    assert issubclass(atoll.DeadlineExceeded, TimeoutError)


def test_types_and_shardings() -> None:
    assert repr(atoll.f32[64, 32].split(0)) == "atoll.f32[64,32].split(0)"
    assert repr(atoll.i32[None, 3]) == "atoll.i32[?,3]"
    assert atoll.f32[8, 8].axes(0, 1).sharding == atoll.axes(0, 1)
    assert atoll.split(1, axis=1).axes == (None, 1)
    assert atoll.f32[2].replicated().sharding == atoll.replicated


def test_tracing_errors_point_at_the_misuse() -> None:
    b = _atoll.FunctionBuilder("f")
    x = b.input("f32", [4], [-1])
    other = _atoll.FunctionBuilder("g").input("f32", [4], [-1])
    try:
        x + other
    except atoll.InvalidArgument as e:
        assert "two functions ('f' and 'g')" in str(e)
    else:
        raise AssertionError("mixing two functions' values was accepted")
    try:
        bool(x)
    except TypeError as e:
        assert "no truth value" in str(e)
    else:
        raise AssertionError("a traced value had a truth value")
