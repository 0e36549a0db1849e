"""Resize (and Upsample): every mode is separable and affine along each axis, so each
resized axis is a matrix product with an interpolation matrix worked out at load, by
onnx's reference implementation on an identity (out = x . A + b along the axis; b is the
extrapolation value where tf_crop_and_resize samples outside)."""

from __future__ import annotations

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator

from .. import lax
from ._ops import op


def _axis_matrix(ctx, n, attrs, scale, size, roi, aspect=None):
    """A [n, out] and b [out] of one axis resized alone. aspect: (policy, n_k, size_k) of
    keep_aspect_ratio_policy, whose scale is that of the axis k that decides it: a second
    axis like k beside this one makes the reference pick it (its size and its coordinates)."""
    inputs = ["X", "roi", "scales" if size is None else "", "sizes" if size is not None else ""]
    node = helper.make_node("Resize", [i for i in inputs if i] if size is None else
                            ["X", "roi", "", "sizes"], ["Y"], **attrs)
    ev = ReferenceEvaluator(node, opsets={"": 19})
    feeds = {"roi": np.array([0, roi[0], 1, roi[1]], np.float32) if roi is not None
             else np.array([], np.float32)}
    if size is None:
        feeds["scales"] = np.array([1, scale], np.float32)
    else:
        feeds["sizes"] = np.array([n, size], np.int64)
    eye, zero = np.eye(n, dtype=np.float64), np.zeros((n, n), np.float64)
    if aspect is not None:
        policy, n_k, size_k = aspect
        node = helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], axes=[1, 2],
                                keep_aspect_ratio_policy=policy, **attrs)
        ev = ReferenceEvaluator(node, opsets={"": 19})
        feeds = {"sizes": np.array([size, size_k], np.int64)}
        eye = np.repeat(eye[:, :, None], n_k, axis=2)
        zero = np.zeros((n, n, n_k), np.float64)
    feeds["X"] = eye
    with np.errstate(all="ignore"):
        ones = ev.run(None, feeds)[0]
        feeds["X"] = zero
        zeros = ev.run(None, feeds)[0]
    if aspect is not None:  # the aux axis is constant along itself
        ones, zeros = ones[..., 0], zeros[..., 0]
    return ones - zeros, zeros[0]


def _apply(v, a, A, b, ctx):
    rank = len(v.shape)
    c = "f64" if v.dtype == "f64" else "f32"
    u = v if v.dtype == c else lax.convert_element_type(v, c)
    m = ctx.value(A.astype(np.float64 if c == "f64" else np.float32))
    out = lax.dot_general(u, m, (((a,), (0,)), ((), ())))
    perm = list(range(rank - 1))
    perm.insert(a, rank - 1)
    out = lax.transpose(out, perm)
    if np.any(b != 0):
        bv = ctx.value(b.astype(np.float64 if c == "f64" else np.float32))
        out = lax.add(out, lax.broadcast_in_dim(bv, out.shape, [a]))
    return out


def _resize_with(ctx, v, attrs, scales, sizes, roi, axes):
    rank = len(v.shape)
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    policy = attrs.pop("keep_aspect_ratio_policy", b"stretch")
    policy = policy.decode() if isinstance(policy, bytes) else policy
    attrs.pop("axes", None)
    aspect = None
    if sizes is not None and policy != "stretch":
        ratios = [sizes[j] / v.shape[a] for j, a in enumerate(axes)]
        k = int(np.argmin(ratios) if policy == "not_larger" else np.argmax(ratios))
        aspect = (policy, v.shape[axes[k]], int(sizes[k]))
    out = v
    d = v.dtype
    for j, a in enumerate(axes):
        n = v.shape[a]
        scale = None if scales is None else float(scales[j])
        size = None if sizes is None else int(sizes[j])
        if (scale == 1.0 or size == n) and roi is None and aspect is None:
            continue
        r = None if roi is None else (float(roi[j]), float(roi[j + len(axes)]))
        if aspect is not None and r is not None:
            raise ctx.refuse("keep_aspect_ratio_policy with tf_crop_and_resize's roi is not "
                             "supported")
        A, b = _axis_matrix(ctx, n, dict(attrs), scale, size, r, aspect)
        if A.shape[1] == 0:
            raise ctx.refuse(f"axis {a} resized to size 0")
        out = _apply(out, a, A, b, ctx)
    if out.dtype != d:
        if d not in ("f32", "f64", "f16", "bf16"):
            out = lax.round(out, 1)
        out = lax.convert_element_type(out, d)
    return out


@op("Resize")
def _resize(ctx, x, roi=None, scales=None, sizes=None):
    v = ctx.value(x)
    attrs = dict(ctx.attrs)
    if ctx.opset < 11:
        attrs["coordinate_transformation_mode"] = "asymmetric"
        scales, roi = roi, None  # opset 10: (X, scales)
    sc = None if scales is None else ctx.static(scales, "input 'scales'").ravel()
    sz = None if sizes is None else ctx.static(sizes, "input 'sizes'").ravel()
    if sc is not None and sc.size == 0:
        sc = None
    r = None if roi is None else ctx.static(roi, "input 'roi'").ravel()
    mode = attrs.get("coordinate_transformation_mode", b"half_pixel")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if r is not None and (r.size == 0 or mode != "tf_crop_and_resize"):
        r = None
    if sc is None and sz is None:
        raise ctx.refuse("neither scales nor sizes is given")
    return _resize_with(ctx, v, attrs, sc, sz, r, attrs.get("axes"))


@op("Upsample")
def _upsample(ctx, x, scales=None):
    v = ctx.value(x)
    sc = ctx.attr("scales") if scales is None else ctx.static(scales, "input 'scales'").ravel()
    # Upsample's nearest repeats each element (onnx's reference: numpy.repeat), the source
    # index floor(i / scale), where Resize's default rounds.
    attrs = {"mode": ctx.attr("mode", b"nearest"), "coordinate_transformation_mode": "asymmetric",
             "nearest_mode": "floor"}
    return _resize_with(ctx, v, attrs, list(sc), None, None, None)
