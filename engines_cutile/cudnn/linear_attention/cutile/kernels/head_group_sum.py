"""Sum per-output-head gradients over head groups: out[t, j] = sum_r part[t, j*R + r].

Grouped inputs (q/k shared by R = HO / H output heads, or v by HO / HV) receive the sum
of their output heads' gradients (repeat_interleave convention).  Grid: (ceil(T/BT), H).
"""
import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def head_group_sum_kernel(part, out, R: ct.Constant[int], BT: ct.Constant[int],
                          BD: ct.Constant[int]):
    tb = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(part, (tb, j, 0), shape=(BT, R, BD), padding_mode=ZERO)
    s = ct.sum(ct.astype(t, ct.float32), axis=1, keepdims=True)
    ct.store(out, (tb, j, 0), tile=ct.astype(s, out.dtype))
