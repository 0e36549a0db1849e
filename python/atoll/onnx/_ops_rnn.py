"""RNN, GRU and LSTM, unrolled over their static sequence length (forward, reverse,
bidirectional; layout 0 and 1; biases, initial states, clip, LSTM's peepholes and
input_forget, GRU's linear_before_reset). Gates follow the ONNX operator definitions."""

from __future__ import annotations

import numpy as np

from .. import lax
from ._ops import op
from ._util import scalar

_ACTS = {"sigmoid": lax.logistic, "tanh": lax.tanh,
         "relu": lambda v: lax.max(v, scalar(v, 0))}


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _mm(a, w):
    """a [b, k] @ w^T, w [n, k]."""
    return lax.dot_general(a, w, (((1,), (1,)), ((), ())))


def _row(v, i, n):
    """Rows i*n .. (i+1)*n of a 1-D or the last dimension."""
    return lax.slice(v, [i * n], [(i + 1) * n])


def _rnn(kind):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]

    def lower(ctx, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
        X, W, R = ctx.value(x), ctx.value(w), ctx.value(r)
        layout = ctx.attr("layout", 0)
        if layout:
            X = lax.transpose(X, [1, 0, 2])
        T, B, _ = X.shape
        H = ctx.attr("hidden_size") or R.shape[-1]
        direction = _text(ctx.attr("direction", b"forward"))
        dirs = 2 if direction == "bidirectional" else 1
        if seq_lens is not None:
            lens = np.asarray(ctx.static(seq_lens, "input 'sequence_lens'"))
            if (lens != T).any():
                raise ctx.refuse("sequence_lens shorter than the sequence are not supported")
        default = {"RNN": ["tanh"], "GRU": ["sigmoid", "tanh"],
                   "LSTM": ["sigmoid", "tanh", "tanh"]}[kind]
        names = [_text(a).lower() for a in ctx.attr("activations", [])] or default * dirs
        if len(names) == len(default):
            names = names * dirs
        for n in names:
            if n not in _ACTS:
                raise ctx.refuse(f"activation {n!r} is not supported")
        clip = ctx.attr("clip", None)
        if kind == "LSTM" and ctx.attr("input_forget", 0):
            raise ctx.refuse("input_forget=1 is not supported")
        lbr = ctx.attr("linear_before_reset", 0)
        ys, hs, cs = [], [], []
        for d in range(dirs):
            act = [_ACTS[n] for n in names[d * len(default):(d + 1) * len(default)]]
            Wd = lax.reshape(lax.slice(W, [d, 0, 0], [d + 1, *W.shape[1:]]), list(W.shape[1:]))
            Rd = lax.reshape(lax.slice(R, [d, 0, 0], [d + 1, *R.shape[1:]]), list(R.shape[1:]))
            Wg = [lax.slice(Wd, [i * H, 0], [(i + 1) * H, Wd.shape[1]]) for i in range(gates)]
            Rg = [lax.slice(Rd, [i * H, 0], [(i + 1) * H, H]) for i in range(gates)]
            if b is not None:
                Bv = ctx.value(b)
                Bd = lax.reshape(lax.slice(Bv, [d, 0], [d + 1, Bv.shape[1]]), [Bv.shape[1]])
                Wb = [_row(Bd, i, H) for i in range(gates)]
                Rb = [_row(Bd, gates + i, H) for i in range(gates)]
            else:
                Wb = Rb = [lax.full((H,), 0, X.dtype)] * gates
            Wb = [lax.broadcast_in_dim(v, [B, H], [1]) for v in Wb]
            Rb = [lax.broadcast_in_dim(v, [B, H], [1]) for v in Rb]

            def state(s):
                if s is None:
                    return lax.full((B, H), 0, X.dtype)
                v = ctx.value(s)
                v = lax.transpose(v, [1, 0, 2]) if layout else v
                return lax.reshape(lax.slice(v, [d, 0, 0], [d + 1, B, H]), [B, H])
            h, c = state(h0), state(c0)
            if kind == "LSTM" and p is not None:
                Pv = ctx.value(p)
                Pd = lax.reshape(lax.slice(Pv, [d, 0], [d + 1, 3 * H]), [3 * H])
                peep = [lax.broadcast_in_dim(_row(Pd, i, H), [B, H], [1]) for i in range(3)]
            else:
                peep = None

            def clipped(v):
                return v if clip is None else lax.clamp(scalar(v, -clip), v, scalar(v, clip))
            out = [None] * T
            for step in range(T):
                t = T - 1 - step if (direction == "reverse" or d == 1) else step
                xt = lax.reshape(lax.slice(X, [t, 0, 0], [t + 1, B, X.shape[2]]), [B, X.shape[2]])
                xw = [lax.add(_mm(xt, Wg[i]), Wb[i]) for i in range(gates)]
                if kind == "RNN":
                    h = act[0](clipped(lax.add(xw[0], lax.add(_mm(h, Rg[0]), Rb[0]))))
                elif kind == "GRU":
                    z = act[0](clipped(lax.add(xw[0], lax.add(_mm(h, Rg[0]), Rb[0]))))
                    rr = act[0](clipped(lax.add(xw[1], lax.add(_mm(h, Rg[1]), Rb[1]))))
                    if lbr:
                        hh = lax.add(xw[2], lax.mul(rr, lax.add(_mm(h, Rg[2]), Rb[2])))
                    else:
                        hh = lax.add(xw[2], lax.add(_mm(lax.mul(rr, h), Rg[2]), Rb[2]))
                    hh = act[1](clipped(hh))
                    h = lax.add(lax.mul(lax.sub(scalar(z, 1), z), hh), lax.mul(z, h))
                else:  # LSTM: gates i, o, f, c
                    pre = [lax.add(xw[i], lax.add(_mm(h, Rg[i]), Rb[i])) for i in range(4)]
                    if peep is not None:
                        pre[0] = lax.add(pre[0], lax.mul(peep[0], c))
                        pre[2] = lax.add(pre[2], lax.mul(peep[2], c))
                    i_g, f_g = act[0](clipped(pre[0])), act[0](clipped(pre[2]))
                    c_g = act[1](clipped(pre[3]))
                    c = lax.add(lax.mul(f_g, c), lax.mul(i_g, c_g))
                    if peep is not None:
                        pre[1] = lax.add(pre[1], lax.mul(peep[1], c))
                    o_g = act[0](clipped(pre[1]))
                    h = lax.mul(o_g, act[2](c))
                out[t] = lax.reshape(h, [1, 1, B, H])
            ys.append(lax.concatenate(out, 0) if T > 1 else out[0])
            hs.append(lax.reshape(h, [1, B, H]))
            cs.append(lax.reshape(c, [1, B, H]))
        Y = ys[0] if dirs == 1 else lax.concatenate(ys, 1)
        Yh = hs[0] if dirs == 1 else lax.concatenate(hs, 0)
        Yc = cs[0] if dirs == 1 else lax.concatenate(cs, 0)
        if layout:
            Y = lax.transpose(Y, [2, 0, 1, 3])
            Yh, Yc = lax.transpose(Yh, [1, 0, 2]), lax.transpose(Yc, [1, 0, 2])
        return (Y, Yh, Yc) if kind == "LSTM" else (Y, Yh)
    return lower


op("RNN", fold=False)(_rnn("RNN"))
op("GRU", fold=False)(_rnn("GRU"))
op("LSTM", fold=False)(_rnn("LSTM"))
