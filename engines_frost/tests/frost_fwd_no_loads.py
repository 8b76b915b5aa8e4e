"""The four-role GDN forward without its steady-state loads: a timing bound of the test
tooling (frost_fwd_experiments.py knob decay="wyc-ws4nl"), wrong by construction after the
first chunks and never checked against float64.

The product's four-role forward (fwd_ws4.RawRingInChain) takes ~5.0 us per chunk on the
H100 while its chain with math's Gram compiled out takes ~3.8 and math with the chain's
products compiled out ~3.4 (kernels/NOTES.md "P's Gram and the gate scan on the copy
warpgroup, measured"). Whether the copy warpgroup's loads (a cp.async round trip per chunk
for the next chunk's rows and this chunk's v, gated on the chain's release of chunk c - 2)
take part in that: here the copies load the first RING chunks' rows and the first SETS
chunks' v as the product does, then issue nothing and keep every barrier, so every role
runs its product code on rows already in shared memory (real data, no NaNs: the times do
not depend on stale values). Timed with bench/frost_stage_times.py's variants "full" (all
roles, no loads) and "gram" (the chain and the factor rows, no loads): the chain's own
step.
"""
from __future__ import annotations

import cutlass.cute as cute

from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK
from cudnn.linear_attention.frost.kernels.fwd_ws import SETS
from cudnn.linear_attention.frost.kernels.fwd_ws4 import RING, FourRoles, RawRingInChain
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds


class NoLoads(RawRingInChain):
    """RawRingInChain whose copies stop loading after the first chunks (module docstring)."""

    def sequence(self, s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h):
        """FourRoles' roles, the sequence's first token kept for the copies' guards (a
        runtime value: the copies compare each chunk's first token with it). A plain
        method, traced inline."""
        self.nl_bounds = (mcu, n, T)
        return FourRoles.sequence(self, s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h)

    def first_token(self):
        """The sequence's first token, read again where a guard needs it (traced inline)."""
        return sequence_bounds(*self.nl_bounds)[0]

    @cute.jit
    def copy_ring_rows(self, s, r, t0, eos):
        """The ring's first RING chunks as the product copies them; after them an empty group."""
        if t0 < self.first_token() + RING * CHUNK:
            super(NoLoads, self).copy_ring_rows(s, r, t0, eos)
        else:
            cute.arch.cp_async_commit_group()

    @cute.jit
    def prefetch_v(self, s, t0, eos, lane, wid):
        """The first SETS chunks' v as the product copies it; after them nothing."""
        if t0 < self.first_token() + SETS * CHUNK:
            super(NoLoads, self).prefetch_v(s, t0, eos, lane, wid)
