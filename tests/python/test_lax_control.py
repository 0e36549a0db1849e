"""atoll.lax's control flow (while_loop, fori_loop, scan, cond, switch) and windowed
primitives (reduce_window, select_and_scatter_add, conv_general_dilated, reduce_precision)
against jax.lax on CPU, the oracle, on a real cluster, over seeded random shapes, dtypes,
trip counts, windows (size-0 dimensions among them) and dimension numbers. Loops and
branches run on the device inside one computation; bodies close over values of the
function, as jax's do. The window and convolution generators run on cut operands too
(test_lax_sharded.py).
"""

from __future__ import annotations

import os
from typing import Any, Callable, FrozenSet, Iterable, Iterator, Sequence, Tuple

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax._src.lax.windowed_reductions import _select_and_scatter_add  # noqa: E402

import atoll  # noqa: E402
from atoll import lax  # noqa: E402
from atoll._types import dtype_of_numpy  # noqa: E402
from test_lax import CASES, SEED, Case, check_equal, draw, run_cases  # noqa: E402

jax.config.update("jax_enable_x64", True)


def run(client: atoll.Client, slice_: atoll.Slice, fn: Callable[..., Any],
        args: Sequence[np.ndarray], splits: Sequence[int] = ()) -> Tuple[np.ndarray, ...]:
    """fn traced on args' types (argument i cut along dimension splits[i] over mesh axis 0
    where given) and run: every output as numpy."""
    types = []
    for i, a in enumerate(args):
        t = dtype_of_numpy(a.dtype)[tuple(a.shape)]
        if i < len(splits) and splits[i] >= 0:
            t = t.split(splits[i])
        types.append(t)
    traced = client.function(slice_, *types)(fn)
    result = client.run(traced, *args).result(timeout=60)
    return tuple(np.asarray(r) for r in result) if isinstance(result, tuple) else (
        np.asarray(result),)


@pytest.fixture()
def one_device(client: atoll.Client) -> atoll.Slice:
    return client.slice(1)


def close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal dtype and shape, values within sums' rounding in another order (XLA may fuse
    and reassociate): 1e-5 relative in f32, 1e-12 in f64."""
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"{what}: {got.dtype}{got.shape}, JAX {want.dtype}{want.shape}")
    tol = 1e-5 if want.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def finite(rng: np.random.Generator, dtype: Any, shape: Tuple[int, ...], scale: float = 1.0
           ) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def test_while_loop_with_a_data_dependent_trip_count_matches_jax(client, one_device) -> None:
    rng = np.random.default_rng([SEED, 101])
    for case in range(CASES):
        dtype = [np.float32, np.float64][case % 2]
        shape = tuple(int(s) for s in rng.integers(1, 5, rng.integers(1, 3)))
        x = np.abs(finite(rng, dtype, shape)) + 0.1
        limit = float(rng.uniform(1, 200))

        def body(c, lax_=lax):
            i, v = c
            return i + 1, v * 1.5 + 0.25

        def ours(v):
            n = lax.full((), 0, "i32")
            limit_v = lax.full((), limit, v.dtype)
            return lax.while_loop(
                lambda c: lax.lt(lax.reduce_max(c[1], tuple(range(len(shape)))), limit_v),
                body, (n, v))

        def theirs(v):
            return jlax.while_loop(lambda c: c[1].max() < limit,
                                   lambda c: (c[0] + 1, c[1] * 1.5 + 0.25), (np.int32(0), v))

        got = run(client, one_device, ours, [x])
        want = jax.jit(theirs)(x)
        check_equal(got[0], np.asarray(want[0]), 0, f"while trips, case {case}")
        close(got[1], np.asarray(want[1]), f"while carry, case {case}")


def test_fori_loop_closing_over_weights_matches_jax(client, one_device) -> None:
    rng = np.random.default_rng([SEED, 102])
    for case in range(CASES // 2):
        d = int(rng.integers(1, 6))
        steps = int(rng.integers(0, 6))
        x, w = finite(rng, np.float32, (d,)), finite(rng, np.float32, (d, d), 0.5)
        dims = (((0,), (0,)), ((), ()))
        got = run(client, one_device, lambda x_, w_: lax.fori_loop(
            0, steps, lambda i, v: lax.tanh(lax.dot_general(v, w_, dims)), x_), [x, w])
        want = jax.jit(lambda x_, w_: jlax.fori_loop(
            0, steps, lambda i, v: jnp_tanh(jlax.dot_general(v, w_, dims)), x_))(x, w)
        close(got[0], np.asarray(want), f"fori_loop {steps} steps, case {case}")


def jnp_tanh(x: Any) -> Any:
    return jlax.tanh(x)


def rnn_cell(lax_: Any, dims: Any) -> Callable[..., Any]:
    def cell(h, x, w, u):
        new = lax_.tanh(lax_.add(lax_.dot_general(h, w, dims), lax_.dot_general(x, u, dims)))
        return new, new
    return cell


def scan_rnn_cases(reverse: bool, rng: np.random.Generator, cases: Iterable[int] = range(
        CASES // 2), even: bool = False) -> Iterator[Case]:
    """An RNN over xs [t, b, e]; on cut operands the batch keeps its cut, and the scanned
    dimension and the contracted features must be whole."""
    dims = (((1,), (0,)), ((), ()))
    ours_cell, their_cell = rnn_cell(lax, dims), rnn_cell(jlax, dims)
    for case in cases:
        b, t, d, e = (int(s) * (2 if even else 1) for s in rng.integers(1, 5, 4))
        h0, xs = finite(rng, np.float32, (b, d)), finite(rng, np.float32, (t, b, e))
        w, u = finite(rng, np.float32, (d, d), 0.5), finite(rng, np.float32, (e, d), 0.5)
        for i, what in enumerate(("carry", "ys")):
            yield Case(f"scan {what}, case {case}", lambda h, x, w_, u_, i=i: lax.scan(
                lambda c, xt: ours_cell(c, xt, w_, u_), h, x, reverse=reverse)[i],
                lambda h, x, w_, u_, i=i: jlax.scan(
                    lambda c, xt: their_cell(c, xt, w_, u_), h, x, reverse=reverse)[i],
                [h0, xs, w, u], check=close,
                dims=[("b", "d"), ("t", "b", "e"), (None, None), (None, None)],
                whole=frozenset({"t", "d", "e"}))


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_rnn_matches_jax(client, one_device, reverse: bool) -> None:
    run_cases(client, one_device,
              scan_rnn_cases(reverse, np.random.default_rng([SEED, 103, int(reverse)])))


def test_scan_of_pytrees_without_ys_and_of_integers_matches_jax(client, one_device) -> None:
    rng = np.random.default_rng([SEED, 104])
    xs = {"a": draw(rng, "i32", (4, 3)), "b": draw(rng, "i64", (4,))}
    init = (np.zeros(3, np.int32), np.zeros((), np.int64))

    def step(lax_: Any) -> Callable[..., Any]:
        def f(c, x):
            return (lax_.add(c[0], x["a"]), lax_.max(c[1], x["b"])), None
        return f

    got = run(client, one_device, lambda a, b, c0, c1: lax.scan(
        step(lax), (c0, c1), {"a": a, "b": b})[0], [xs["a"], xs["b"], *init])
    want = jax.jit(lambda a, b, c0, c1: jlax.scan(
        step(jlax), (c0, c1), {"a": a, "b": b})[0])(xs["a"], xs["b"], *init)
    check_equal(got[0], np.asarray(want[0]), 0, "scan pytree carry 0 (integer sums wrap)")
    check_equal(got[1], np.asarray(want[1]), 0, "scan pytree carry 1")


def cond_switch_cases(rng: np.random.Generator, even: bool = False) -> Iterator[Case]:
    """switch at indices in and out of range (jax clamps them) and cond both ways, over
    operands that keep their cut through either branch."""
    x, k = (finite(rng, np.float32, (4, 2) if even else (3, 2)) for _ in range(2))
    dims = [(), ("d0", "d1"), ("d0", "d1")]
    for index in [-3, 0, 1, 2, 7]:
        branches = [lambda v, k_: v * 2.0, lambda v, k_: v + k_, lambda v, k_: v - k_]
        yield Case(f"switch index {index}", lambda i_, v, k_, branches=branches: lax.switch(
            i_, [lambda a, b=b: b(a, k_) for b in branches], v),
            lambda i_, v, k_, branches=branches: jlax.switch(
                i_, [lambda a, b=b: b(a, k_) for b in branches], v),
            [np.asarray(np.int32(index)), x, k], dims=dims)
    for pred in [True, False]:
        yield Case(f"cond {pred}", lambda p_, v, k_: lax.cond(
            p_, lambda a: lax.mul(a, k_), lambda a: lax.neg(a), v),
            lambda p_, v, k_: jlax.cond(p_, lambda a: a * k_, lambda a: -a, v),
            [np.asarray(pred), x, k], dims=dims)


def test_cond_and_switch_match_jax_with_out_of_range_indices(client, one_device) -> None:
    run_cases(client, one_device, cond_switch_cases(np.random.default_rng([SEED, 105])))


def test_a_cond_inside_a_scan_inside_a_while_matches_jax(client, one_device) -> None:
    rng = np.random.default_rng([SEED, 106])
    xs, w = finite(rng, np.float64, (5, 3)), finite(rng, np.float64, (3,))

    def program(lax_: Any, full: Callable[..., Any]) -> Callable[..., Any]:
        def f(xs_, w_):
            def scan_body(c, x):
                c = lax_.cond(lax_.gt(lax_.reduce_sum(x, (0,)), full(0.0)),
                              lambda a: lax_.add(a, lax_.mul(x, w_)), lambda a: lax_.sub(a, x), c)
                return c, lax_.reduce_sum(c, (0,))

            def while_body(state):
                n, c = state
                c, _ = lax_.scan(scan_body, c, xs_)
                return lax_.add(n, full(1, np.int32)), c

            return lax_.while_loop(lambda s: lax_.lt(s[0], full(3, np.int32)), while_body,
                                   (full(0, np.int32), lax_.mul(w_, full(0.0))))
        return f

    got = run(client, one_device, program(lax, lambda v, t=np.float64: lax.full((), v, t)),
              [xs, w])
    want = jax.jit(program(jlax, lambda v, t=np.float64: jlax.full((), v, t)))(xs, w)
    check_equal(got[0], np.asarray(want[0]), 0, "nested trips")
    close(got[1], np.asarray(want[1]), "nested carry")


def test_an_inner_loop_over_an_outer_value_uses_the_enclosing_bodys_values(client,
                                                                         one_device) -> None:
    """The inner loop's carry starts from the function's input, and its body uses the outer
    body's carry: it runs inside the outer body, which lifts the input in."""
    rng = np.random.default_rng([SEED, 113])
    x = finite(rng, np.float64, (4,))

    def program(lax_: Any) -> Callable[..., Any]:
        def f(x_):
            def outer_body(i, c):
                return lax_.fori_loop(0, 2, lambda j, d: lax_.add(d, lax_.tanh(c)), x_)
            return lax_.fori_loop(0, 3, outer_body, lax_.neg(x_))
        return f

    got = run(client, one_device, program(lax), [x])
    close(got[0], np.asarray(jax.jit(program(jlax))(x)), "nested loops over outer values")


def test_a_scan_over_a_batch_split_across_two_devices_matches_jax(client) -> None:
    rng = np.random.default_rng([SEED, 107])
    dims = (((1,), (0,)), ((), ()))
    h0, xs = finite(rng, np.float32, (4, 3)), finite(rng, np.float32, (6, 4, 2))
    w, u = finite(rng, np.float32, (3, 3), 0.5), finite(rng, np.float32, (2, 3), 0.5)
    cell, their_cell = rnn_cell(lax, dims), rnn_cell(jlax, dims)
    got = run(client, client.slice(2), lambda h, x, w_, u_: lax.scan(
        lambda c, xt: cell(c, xt, w_, u_), h, x), [h0, xs, w, u], splits=[0, 1])
    want = jax.jit(lambda h, x, w_, u_: jlax.scan(
        lambda c, xt: their_cell(c, xt, w_, u_), h, x))(h0, xs, w, u)
    close(got[0], np.asarray(want[0]), "split scan carry")
    close(got[1], np.asarray(want[1]), "split scan ys")


def test_bad_loops_are_refused_naming_what_was_wrong(client, one_device) -> None:
    x = atoll.f32[4, 3]
    with pytest.raises(atoll.InvalidArgument, match="carry may not change"):
        client.function(one_device, x)(lambda v: lax.while_loop(
            lambda c: lax.lt(lax.reduce_sum(c, (0, 1)), lax.full((), 9.0, "f32")),
            lambda c: lax.reshape(c, (3, 4)), v))
    with pytest.raises(atoll.InvalidArgument, match="bool"):
        client.function(one_device, x)(lambda v: lax.while_loop(
            lambda c: lax.reduce_sum(c, (0, 1)), lambda c: c, v))
    two = client.slice(2)
    with pytest.raises(atoll.InvalidArgument, match="scanned dimension 0"):
        client.function(two, atoll.f32[4, 3].split(0), atoll.f32[3])(
            lambda xs, c: lax.scan(lambda a, r: (lax.add(a, r), a), c, xs))
    with pytest.raises(atoll.InvalidArgument, match="may not hold one"):
        client.function(two, atoll.f32[4, 3])(lambda v: lax.fori_loop(
            0, 2, lambda i, a: atoll.ops.all_reduce_sum(a), v))
    with pytest.raises(atoll.InvalidArgument, match="branch 1 gives"):
        client.function(one_device, x, atoll.i32[()])(lambda v, i: lax.switch(
            i, [lambda a: a, lambda a: lax.reduce_sum(a, (0,))], v))


def window_cases(rng: np.random.Generator, rank: int) -> Tuple[Any, ...]:
    window = tuple(int(w) for w in rng.integers(1, 4, rank))
    strides = tuple(int(s) for s in rng.integers(1, 3, rank))
    padding = [(int(lo), int(hi)) for lo, hi in rng.integers(0, 2, (rank, 2))]
    base = tuple(int(b) for b in rng.integers(1, 3, rank))
    wdil = tuple(int(d) for d in rng.integers(1, 3, rank))
    return window, strides, padding, base, wdil


def still_on_first(case: int, window: Any, strides: Any, padding: Any, base: Any = None,
                   wdil: Any = None) -> Tuple[Any, ...]:
    """For the cut runs, every other case: a window that does not slide along dimension 0
    (the batch of a pooling), so that a cut of it is kept."""
    if case % 2:
        return window, strides, padding, base, wdil
    one = lambda t: None if t is None else (1,) + tuple(t[1:])  # noqa: E731
    pads = padding if isinstance(padding, str) else [(0, 0)] + list(padding[1:])
    return one(window), one(strides), pads, one(base), one(wdil)


def window_shape(rng: np.random.Generator, rank: int, even: bool) -> Tuple[int, ...]:
    """Sizes 2 to 5 (doubled where ``even``, for the cut runs); one case in six has a
    dimension of size 0."""
    shape = [int(s) * (2 if even else 1) for s in rng.integers(2, 6, rank)]
    if rng.random() < 1 / 6:
        shape[int(rng.integers(0, rank))] = 0
    return tuple(shape)


def sliding(rank: int, window: Any, strides: Any, padding: Any, base: Any = None,
            wdil: Any = None) -> FrozenSet[str]:
    """The names of the dimensions a window slides along (a cut of them is refused)."""
    pads = padding if not isinstance(padding, str) else [(0, 0)] * rank
    trivial = [window[d] == 1 and strides[d] == 1 and tuple(pads[d]) == (0, 0) and
               (base is None or base[d] == 1) and (wdil is None or wdil[d] == 1)
               for d in range(rank)]
    if isinstance(padding, str) and padding == "SAME":
        trivial = [t and window[d] == 1 for d, t in enumerate(trivial)]
    return frozenset(f"d{d}" for d in range(rank) if not trivial[d])


def reduce_window_cases(kind: str, rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                        even: bool = False) -> Iterator[Case]:
    ours = {"sum": lax.reduce_window_sum, "max": lax.reduce_window_max,
            "min": lax.reduce_window_min}[kind]
    theirs = {"sum": (jlax.add, 0), "max": (jlax.max, -np.inf), "min": (jlax.min, np.inf)}[kind]
    for case in cases:
        dtype = ["f32", "f64", "i32", "u8"][case % 4]
        rank = int(rng.integers(1, 4))
        shape = window_shape(rng, rank, even)
        x = draw(rng, dtype, shape)
        window, strides, padding, base, wdil = window_cases(rng, rank)
        if case % 3 == 0:
            padding = ["SAME", "VALID"][case % 2]
        if even:
            window, strides, padding, base, wdil = still_on_first(case, window, strides,
                                                                  padding, base, wdil)
        init = np.asarray(theirs[1] if dtype.startswith("f") else
                          {"sum": 0, "max": np.iinfo(x.dtype).min,
                           "min": np.iinfo(x.dtype).max}[kind]).astype(x.dtype)
        yield Case(f"reduce_window_{kind} {dtype}{shape} {window} {strides} {padding}",
                   lambda v, window=window, strides=strides, padding=padding, base=base,
                   wdil=wdil: ours(v, window, strides, padding, base, wdil),
                   lambda v, window=window, strides=strides, padding=padding, base=base,
                   wdil=wdil, init=init: jlax.reduce_window(v, init, theirs[0], window, strides,
                                                            padding, base, wdil),
                   [x], 0 if kind != "sum" else 2,
                   whole=sliding(rank, window, strides, padding, base, wdil))


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_window_matches_jax(client, one_device, kind: str) -> None:
    rng = np.random.default_rng([SEED, 108, ["sum", "max", "min"].index(kind)])
    run_cases(client, one_device, reduce_window_cases(kind, rng))


def select_and_scatter_add_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES),
                                 even: bool = False) -> Iterator[Case]:
    for case in cases:
        dtype = [np.float32, np.float64][case % 2]
        rank = int(rng.integers(1, 4))
        shape = window_shape(rng, rank, even)
        x = finite(rng, dtype, shape)
        x[rng.random(shape) < 0.2] = 1.0  # ties: the first in window order is selected
        window, strides, padding, _, _ = window_cases(rng, rank)
        if even:
            window, strides, padding, _, _ = still_on_first(case, window, strides, padding)
        select = [jlax.ge_p, jlax.le_p][case % 2]
        windows = jax.eval_shape(lambda v: jlax.reduce_window(
            v, -np.inf, jlax.max, window, strides, padding), x).shape
        source = finite(rng, dtype, windows)
        slides = sliding(rank, window, strides, padding)
        yield Case(f"select_and_scatter_add {shape} {window} {strides}",
                   lambda s, v, select=select, window=window, strides=strides, padding=padding:
                   lax.select_and_scatter_add(s, v, select.name, window, strides, padding),
                   lambda s, v, select=select, window=window, strides=strides, padding=padding:
                   _select_and_scatter_add(s, v, select, window, strides, padding),
                   [source, x], 2,
                   # the source's dimensions are the windows': the operand's where none slides
                   dims=[tuple(f"d{d}" if f"d{d}" not in slides else f"w{d}"
                               for d in range(rank)), tuple(f"d{d}" for d in range(rank))],
                   whole=slides | {f"w{d}" for d in range(rank)})


def test_select_and_scatter_add_matches_jax(client, one_device) -> None:
    run_cases(client, one_device,
              select_and_scatter_add_cases(np.random.default_rng([SEED, 109])))


def conv_close(lhs: np.ndarray, rhs: np.ndarray) -> Callable[[np.ndarray, np.ndarray, str], None]:
    f32 = lhs.dtype == np.float32
    scale = float(np.abs(lhs).max(initial=0) * np.abs(rhs).max(initial=0) * rhs[0].size)

    def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
        assert got.shape == want.shape and got.dtype == want.dtype, (
            f"{what}: {got.dtype}{got.shape}, JAX {want.dtype}{want.shape}")
        np.testing.assert_allclose(got, want, rtol=1e-5 if f32 else 1e-12,
                                   atol=scale * (1e-6 if f32 else 1e-14), err_msg=what)
    return check


def conv_cases(rng: np.random.Generator, cases: Iterable[int] = range(CASES * 2),
               even: bool = False) -> Iterator[Case]:
    """N-D convolutions with strides, padding (negative too), dilations, feature and batch
    groups, flax's NHWC/HWIO; one in six has a batch or a spatial dimension of size 0. On
    cut operands only the lhs's batch may be cut (not with batch groups)."""
    for case in cases:
        n = [1, 2, 2, 3][case % 4]
        dtype = [np.float32, np.float64][case % 2]
        groups, batch_groups = [(1, 1), (2, 1), (1, 2)][case % 3]
        batch = int(rng.integers(1, 3)) * batch_groups * (2 if even else 1)
        cin = int(rng.integers(1, 3)) * groups
        cout = int(rng.integers(1, 3)) * groups * batch_groups
        spatial = [int(s) for s in rng.integers(3, 7, n)]
        if rng.random() < 1 / 6:  # an empty batch, or an empty spatial dimension
            which = int(rng.integers(0, n + 1))
            if which == n:
                batch = 0
            else:
                spatial[which] = 0
        kernel = tuple(int(k) for k in rng.integers(1, 4, n))
        lhs = finite(rng, dtype, (batch, cin) + tuple(spatial))
        rhs = finite(rng, dtype, (cout, cin // groups) + kernel)
        strides = tuple(int(s) for s in rng.integers(1, 3, n))
        padding: Any = [(int(lo), int(hi)) for lo, hi in rng.integers(-1, 3, (n, 2))]
        if case % 5 == 0:
            padding = "SAME"
        lhs_dil = tuple(int(d) for d in rng.integers(1, 3, n))
        rhs_dil = tuple(int(d) for d in rng.integers(1, 3, n))
        dnums = None
        lhs_names = ("n", "c") + tuple(f"s{i}" for i in range(n))
        if n == 2 and case % 2 == 0:  # NHWC, HWIO as flax writes them
            lhs, rhs = lhs.transpose(0, 2, 3, 1), rhs.transpose(2, 3, 1, 0)
            dnums = ("NHWC", "HWIO", "NHWC")
            lhs_names = ("n", "s0", "s1", "c")
        kwargs = dict(lhs_dilation=lhs_dil, rhs_dilation=rhs_dil, dimension_numbers=dnums,
                      feature_group_count=groups, batch_group_count=batch_groups)
        try:
            jax.eval_shape(lambda a, b: jlax.conv_general_dilated(a, b, strides, padding,
                                                                  **kwargs), lhs, rhs)
        except Exception:  # noqa: BLE001 - a configuration jax refuses is not a case
            continue
        rhs_names = tuple(f"k{d}" for d in range(n + 2))
        yield Case(f"conv case {case}: n {n}, lhs {lhs.shape}, groups {groups}, batch groups "
                   f"{batch_groups}, {dnums}",
                   lambda a, b, strides=strides, padding=padding, kwargs=kwargs:
                   lax.conv_general_dilated(a, b, strides, padding, **kwargs),
                   lambda a, b, strides=strides, padding=padding, kwargs=kwargs:
                   jlax.conv_general_dilated(a, b, strides, padding, **kwargs),
                   [lhs, rhs], check=conv_close(lhs, rhs), dims=[lhs_names, rhs_names],
                   whole=frozenset(set(lhs_names) - ({"n"} if batch_groups == 1 else set()))
                   | set(rhs_names))


def test_conv_general_dilated_matches_jax(client, one_device) -> None:
    ran = run_cases(client, one_device, conv_cases(np.random.default_rng([SEED, 110])))
    assert ran >= CASES, f"only {ran} of {CASES * 2} drawn convolutions were cases"


def test_reduce_precision_matches_jax(client, one_device) -> None:
    rng = np.random.default_rng([SEED, 111])
    for case in range(CASES):
        dtype = ["f32", "f64"][case % 2]
        x = draw(rng, dtype, (int(rng.integers(1, 40)),))
        exponent, mantissa = [(8, 7), (5, 10), (4, 3), (11, 52), (8, 23), (2, 1)][case % 6]
        want = np.asarray(jax.jit(lambda v: jlax.reduce_precision(v, exponent, mantissa))(x))
        got = run(client, one_device, lambda v: lax.reduce_precision(v, exponent, mantissa), [x])
        check_equal(got[0], want, 0, f"reduce_precision {dtype} e{exponent} m{mantissa}")


def test_a_small_cnn_forward_matches_jax(client, one_device) -> None:
    """conv, relu, max pool, then a dense layer over the flattened features (NHWC, as flax)."""
    rng = np.random.default_rng([SEED, 112])
    x = finite(rng, np.float32, (2, 8, 8, 3))
    k = finite(rng, np.float32, (3, 3, 3, 4), 0.3)
    w = finite(rng, np.float32, (4 * 4 * 4, 5), 0.1)

    def net(lax_: Any) -> Callable[..., Any]:
        def f(x_, k_, w_):
            y = lax_.conv_general_dilated(x_, k_, (1, 1), "SAME",
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"))
            y = lax_.max(y, lax_.full(y.shape, 0.0, np.float32))
            y = lax_.reduce_window_max(y, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") if lax_ is lax \
                else jlax.reduce_window(y, -np.inf, jlax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            y = lax_.reshape(y, (2, 64))
            return lax_.dot_general(y, w_, (((1,), (0,)), ((), ())))
        return f

    got = run(client, one_device, net(lax), [x, k, w])[0]
    want = np.asarray(jax.jit(net(jlax))(x, k, w))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
