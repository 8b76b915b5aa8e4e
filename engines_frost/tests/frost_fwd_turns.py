"""The four-role GDN forward's chain with each product group waited at once and, optionally,
the two chain warpgroups taking turns to issue them: an experiment kernel of the test
tooling (frost_fwd_experiments.py knobs decay="wyc-ws4wait" and "wyc-ws4turns").

The product's chain (fwd_ws4.RawRingInChain over fwd_ws_wy.u_through_r and
fwd_wgmma_scaled.finish_chain) keeps S^T Q^T in flight under R and U's blocks, holds the
bf16 copy of the state across them and O's accumulator beside U's operands; ptxas then
serializes every wgmma of the chain (C7512 at the 192-register chain) and both chain
warpgroups, released together by FULL each chunk, issue their groups at the same moments
and do their element-wise work at the same moments, the tensor cores idle meanwhile.

WaitEachGroup: five groups per chunk (four without an output), each committed and waited
at once, nothing else in flight, the bf16 copy of S rebuilt before each group that reads
it and never held across another:
    X = S^T K^T;  R = W0 + X diag(fr);  U^T = bf16(R^T) A^T;  U's blocks (store, A operands)
    O = (S^T Q^T) diag(fo);  O += U^T P^T;  the output rows
    S^T <- S^T e^Gam_last + (U^T diag(fk)) K
TakingTurns adds the published Hopper design's ping-pong: before issuing a group a
warpgroup waits for its turn on a named barrier and after committing it hands the turn to
the other (TURN + 0 is warpgroup 0's, TURN + 1 warpgroup 1's; 256 threads each: one side
waits, the other arrives). Warpgroup 1 hands warpgroup 0 the first turn before its chunks
and warpgroup 0 takes the last hand-over after its chunks, so every arrival is matched.
The tensor cores then run one warpgroup's group while the other does its element-wise
work, and the order the two issue in is the same every chunk.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32
from cutlass.cute.nvgpu import warpgroup

from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, store_values_block, to_a_operand
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_ROWS, WG_THREADS, assemble_a, block_of, \
    store_output_rows
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import FK, FO, FR, wgmma_mn
from cudnn.linear_attention.frost.kernels.fwd_ws4 import BAR_COPIES, RawRingInChain
from cudnn.linear_attention.frost.kernels.fwd_ws_wy import FB, mma_group

#: the two warpgroups' turn barriers (after the four-role kernel's last id, BAR_COPIES)
BAR_TURN = BAR_COPIES + 1
TURN_THREADS = 2 * WG_THREADS
assert BAR_TURN + 1 < 16  # the hardware's named barriers


class WaitEachGroup(RawRingInChain):
    """RawRingInChain with the chain of the module docstring (no turns)."""

    takes_turns = False

    def take_turn(self, wid):
        """Wait until it is this warpgroup's turn to issue (TakingTurns). Traced inline."""
        if cutlass.const_expr(self.takes_turns):
            cute.arch.barrier(barrier_id=BAR_TURN + wid // 4, number_of_threads=TURN_THREADS)

    def pass_turn(self, wid):
        """Hand the turn to the other warpgroup (TakingTurns). Traced inline."""
        if cutlass.const_expr(self.takes_turns):
            cute.arch.barrier_arrive(barrier_id=BAR_TURN + 1 - wid // 4, number_of_threads=TURN_THREADS)

    def one_group(self, wid, wg, acc, terms, fresh: bool = True):
        """One product group, issued in this warpgroup's turn and waited for at once."""
        self.take_turn(wid)
        mma_group(wg, acc, terms, fresh)
        self.pass_turn(wid)
        warpgroup.wait_group(0)

    @cute.jit
    def consume(self, s, mo, mh0, mht, mckpt, mcu, T, N, heads, n, h, bos, eos, chunks, wid, lane):
        if cutlass.const_expr(self.takes_turns):
            if wid >= 4:  # warpgroup 0 issues first
                cute.arch.barrier_arrive(barrier_id=BAR_TURN, number_of_threads=TURN_THREADS)
        RawRingInChain.consume(self, s, mo, mh0, mht, mckpt, mcu, T, N, heads, n, h, bos, eos, chunks, wid, lane)
        if cutlass.const_expr(self.takes_turns):
            if wid < 4:  # warpgroup 1's last hand-over
                cute.arch.barrier(barrier_id=BAR_TURN, number_of_threads=TURN_THREADS)

    @cute.jit
    def consumer_chain(self, st, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        s_v = st.w0
        s_fac = st.fac
        c = self.cfg
        K, C = c.K, CHUNK
        h = heads[3]
        j0 = wid * SUB
        wg_half, g_half, g_st, crd, per = self.chain_mmas(thr, lane, wid)

        # X = S^T K^T, then R = W0 + X diag(fr) in place
        acc_x = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        a_s = to_a_operand(acc_s, g_half.partition_shape_A((WG_ROWS, K)))
        self.one_group(wid, wg_half, acc_x, [(a_s, wg_half.make_fragment_B(g_half.partition_B(st.k)), K // 16)])
        for bi in cutlass.range_constexpr(NBLK):
            for e in cutlass.range_constexpr(per):
                t = bi * SUB + crd[e][1]
                acc_x[bi * per + e] = (s_v[t, j0 + crd[e][0]].to(Float32) * s_fac[FB, t]
                                       + s_fac[FR, t] * acc_x[bi * per + e])
        # U^T = bf16(R^T) A^T
        a_r = to_a_operand(acc_x, g_st.partition_shape_A((WG_ROWS, C)))
        acc_u = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        self.one_group(wid, wg_half, acc_u, [(a_r, wg_half.make_fragment_B(g_half.partition_B(st.ainv)), C // 16)])
        # U's blocks: the training store, U^T for P U, U^T diag(fk) for the state update
        a_u = []
        a_k = []
        for bi in cutlass.range_constexpr(NBLK):
            u = block_of(acc_u, bi, thr.partition_shape_C((SUB, SUB)))
            if cutlass.const_expr(c.write_values):
                store_values_block(st.values, u, crd, t0 + bi * SUB, eos, h, j0)
            a_u.append(to_a_operand(u, thr.partition_shape_A((SUB, SUB))))
            for e in cutlass.range_constexpr(per):
                u[e] = u[e] * s_fac[FK, bi * SUB + crd[e][1]]
            a_k.append(to_a_operand(u, thr.partition_shape_A((SUB, SUB))))
        # O = (S^T Q^T) diag(fo), O += U^T P^T, the output rows
        if cutlass.const_expr(c.write_output):
            acc_o = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
            a_s = to_a_operand(acc_s, g_half.partition_shape_A((WG_ROWS, K)))
            self.one_group(wid, wg_half, acc_o, [(a_s, wg_half.make_fragment_B(g_half.partition_B(st.q)), K // 16)])
            for bi in cutlass.range_constexpr(NBLK):
                for e in cutlass.range_constexpr(per):
                    acc_o[bi * per + e] = acc_o[bi * per + e] * s_fac[FO, bi * SUB + crd[e][1]]
            a_uw = assemble_a(a_u, g_st.partition_shape_A((WG_ROWS, C)))
            self.one_group(wid, wg_half, acc_o, [(a_uw, wg_half.make_fragment_B(g_half.partition_B(st.p)), C // 16)],
                           fresh=False)
            store_output_rows(mo, acc_o, crd, t0, eos, h, j0)
        # S^T <- S^T e^Gam_last + (U^T diag(fk)) K; consume waits for it before releasing the set
        for e in cutlass.range_constexpr(cute.size(acc_s)):
            acc_s[e] = acc_s[e] * self.state_decay(st, coord_s[e][1])
        a_kw = assemble_a(a_k, g_st.partition_shape_A((WG_ROWS, C)))
        acc_w = cute.make_tensor(acc_s.iterator, cute.make_layout(g_st.partition_shape_C((WG_ROWS, K))))
        k_dt = cute.make_tensor(st.k.iterator, cute.select(st.k.layout, mode=[1, 0]))  # [d, t]
        wg_st = wgmma_mn(K)  # chain_mmas's g_st is its slice
        self.take_turn(wid)
        mma_group(wg_st, acc_w, [(a_kw, wg_st.make_fragment_B(g_st.partition_B(k_dt)), C // 16)], fresh=False)
        self.pass_turn(wid)


class TakingTurns(WaitEachGroup):
    """WaitEachGroup with the two chain warpgroups taking turns per group (module docstring)."""

    takes_turns = True
