"""Every op of atoll's IR, as a function of the symbolic values of a traced function.

The operators of atoll.Value cover add, sub, mul, div (+ - * /), matmul (@), neg (unary -)
and transpose (.T). include/atoll/function.h says what each op computes and which
shardings it takes; the unary ops are the rows of include/atoll/unary_ops.def.
"""

from ._atoll.ops import *  # noqa: F401,F403  (the extension defines them all)
