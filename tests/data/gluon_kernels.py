"""A Gluon kernel (Triton's lower-level DSL) with kernscope's named scopes: the same Profiler API as in @triton.jit."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from kernscope.intra import Profiler, tid


@gluon.jit
def scaled_copy(x_ptr, y_ptr, buf, N: gl.constexpr):
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0))
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    offs = gl.program_id(0) * N + gl.arange(0, N, layout=layout)
    prof = prof.enter("load")
    x = gl.load(x_ptr + offs)
    prof = prof.exit("load")
    prof = prof.enter("store")
    gl.store(y_ptr + offs, x * 2.0)
    prof = prof.exit("store")
