"""Tensor shapes from hostile files: element counts with early overflow exits, and what numpy can hold.

Every format's loader asks ``shape_problem`` at load time, so that a shape numpy cannot hold (more dimensions
than numpy has, an extent beyond its index type even beside a zero, a size beyond its address space) is a
FormatError there, never an IndexError or a numpy ValueError later in ``.shape``, ``to_numpy()``, ``info``,
``convert`` or ``dequant``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .limits import limit, show_int

#: numpy's own maximum number of dimensions (NPY_MAXDIMS in numpy 2).
NUMPY_MAX_DIMS = 64
#: The largest extent or byte size numpy can index (``np.intp``).
INTP_MAX = int(np.iinfo(np.intp).max)


def element_count(shape: Iterable[int], cap: int = 1 << 128) -> int:
    """The product of ``shape``, exact up to ``cap``; ``cap + 1`` when it is larger (stops multiplying there, so
    thousands of huge extents cost one pass of small multiplications, not one big integer per step). A zero
    extent anywhere makes it 0."""
    dims = [int(d) for d in shape]
    if 0 in dims:
        return 0
    n = 1
    for d in dims:
        n *= d
        if n > cap:
            return cap + 1
    return n


def shape_problem(shape: Iterable[int], itemsize: int = 8) -> tuple[str, str] | None:
    """(rule, message) when numpy cannot hold an array of ``shape`` (``itemsize`` bytes per value: float64 by
    default, the widest ``to_numpy`` returns); None when it can. Extents must be ints >= 0."""
    dims = list(shape)
    most = min(limit("dimensions"), NUMPY_MAX_DIMS)
    if len(dims) > most:
        rule = "limit.dimensions" if len(dims) > limit("dimensions") else "tensor.n_dims"
        return rule, f"{len(dims)} dimensions (numpy holds at most {NUMPY_MAX_DIMS}; limit dimensions = {limit('dimensions')})"
    for d in dims:
        if d < 0:
            return "tensor.shape", f"negative extent {show_int(d)}"
        if d > INTP_MAX:
            return "tensor.shape", f"extent {show_int(d)} is beyond what numpy can index ({INTP_MAX})"
    n = element_count([d for d in dims if d], cap=INTP_MAX)
    if n * itemsize > INTP_MAX:
        return (
            "tensor.shape",
            f"{show_int(n) if n <= INTP_MAX else 'more than ' + str(INTP_MAX)} elements "
            "(ignoring zero extents) is beyond numpy's address space",
        )
    return None
