"""The static configuration of the FROST backward kernels (their compile-cache key).

The backward runs three kernels (kernels/NOTES_bwd.md): ``states`` (the forward chain
again, writing per-chunk state checkpoints and U), ``chain`` (the state gradient backwards
over the chunks, writing dS per chunk and dR per token) and ``grads`` (every gradient of
one chunk, independently of the others). All three specialise on one FrostBwdConfig;
``stage`` picks the kernel. Pure Python: no torch, no cutlass.
"""
from __future__ import annotations

import dataclasses

from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_rows as _rows
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, register_split_ok

STAGES = ("states", "chain", "grads")
# With the forward's state_checkpoints (cadence 64): ``values`` (U per chunk from the
# checkpointed state, chunks in parallel) replaces ``states``.
CHECKPOINT_STAGES = ("values", "chain", "grads")
# With the forward's U as well (frost_fwd's values): neither states nor values runs.
FORWARD_VALUES_STAGES = ("chain", "grads")
ALL_STAGES = STAGES + ("values",)
STATE_DTYPES = ("float32", "bfloat16")
CHUNK = 64  # tokens per chunk: the forward kernels' C; checkpoint rows count chunks
# The persistent grads grid when the device is not known (ahead-of-time builds): the SM count
# of an H100 SXM / H200, the machines the sm_90a kernels are built for.
DEFAULT_GRADS_CTAS = 132


@dataclasses.dataclass(frozen=True)
class FrostBwdConfig:
    """One backward specialisation. ``fwd`` carries what the forward kernel specialises on
    (dtypes, heads, dims, family flags, l2norm, initial state; never a final state), the
    rest is what only the backward has."""

    fwd: FrostFwdConfig
    stage: str
    dht_dtype: str | None   # d_final_state: "float32" | "bfloat16" | None (absent: zero)
    dh0_dtype: str | None   # d_initial_state: written iff the forward had an initial state
    # S is read from the forward's state_checkpoints (checkpoints.py's packed rows) instead
    # of the states kernel's workspace rows: stages values and grads.
    checkpoints: bool = False
    # U (per token) comes from the forward too (frost_fwd's values, written with the
    # checkpoints): only chain and grads run, and chain zeroes the gradient rows no
    # sequence covers, which states / values do on the other paths.
    forward_values: bool = False
    # CTAs of the persistent grads kernel (scalar gates): the device's SM count, so one CTA
    # per SM walks the (chunk, head) items; a compile-time constant of that kernel only
    # (with_stage resets it for every other kernel, so they stay shared across devices).
    grads_ctas: int = DEFAULT_GRADS_CTAS
    # The chain kernel runs the next chunk's state-independent prep (rows, operands, Gram,
    # inverses) in the same barrier phases as this chunk's chain (bwd_chain_pipelined.py,
    # NOTES_bwd.md v1.6); scalar gates only. Off: the serial chain (bwd_chain.py).
    chain_pipeline: bool = False
    # The chain kernel runs dU^T and the dS^T update on warpgroup MMA (wgmma, B operands
    # from SW128 shared tiles), the back substitution per warp (bwd_chain_wgmma.py,
    # NOTES_bwd.md v1.7; vector gates: "Vector-gate chain on warpgroup MMA"). Off: the
    # serial chain. The product's for every family (bwd.product_choice); the test tooling's
    # FROST_BWD_CHAIN / FROST_BWD_CHAIN_VEC pick other chains (frost_bwd_experiments.py).
    chain_wgmma: bool = False
    # The wgmma chain (chain_wgmma) leaves its dS^T update group in flight across the
    # chunk boundary and retires it after the next chunk's rows stage, which reads and
    # writes none of the group's operands; the checkpoint store of dS^T moves after that
    # retirement (bwd_chain_wgmma.py, NOTES_bwd.md "v1.10 chain: the dS update in flight
    # under the next rows stage"). Same products in the same k16 order: the same gradients,
    # bitwise. Off: the group is retired at the chain step's end. The product's for
    # scalar gates (bwd.product_choice); for vector gates only the test tooling's
    # FROST_BWD_CHAIN_VEC=wgmma_async sets it (frost_bwd_experiments.py).
    chain_async: bool = False
    # The wgmma chain with the scalar decays as per-token factors on its fp32 results and
    # its B operands q-hat and k-hat themselves, no decay-folded QA^T, -KBA^T, KD tiles
    # (bwd_chain_scaled.py, NOTES_bwd.md "The scalar-gate chain without its operand
    # stage"). Scalar gates, bf16 io, with chain_wgmma. The product's (bwd.product_choice;
    # the chain kernel -12 % on the H200), at K = V = 128 under the four-role chain below.
    chain_scaled: bool = False
    # The scaled chain warp-specialised (bwd_chain_ws.py, NOTES_bwd.md "Warp-specialised
    # scalar-gate chain"): a producer role runs the previous chunk's rows, factor rows and
    # Gram while the consumers run this chunk's dS step. With chain_scaled, K = V = 128.
    # Alone an experiment (slower than chain_scaled on the H200: the test tooling's
    # FROST_BWD_CHAIN=wgmma_ws); the product sets it under its four-role chain below.
    chain_ws: bool = False
    # With chain_ws: the roles' setmaxnreg split (consumer, producer); () the kernel's own
    # (bwd_chain_ws: fwd_ws.CONSUMER_REGS / PRODUCER_REGS). An experiment's knob: only the
    # test tooling's FROST_BWD_WS_REGS="consumer,producer" sets it (frost_bwd_experiments.py).
    chain_ws_regs: tuple[int, ...] = ()
    # With chain_ws: the consumers' step without the back substitution, the producer forming
    # the chunk's inverse A and W' = A diag(fr) K (bwd_chain_ws_wy.py, NOTES_bwd.md "The
    # chain without its back substitution"). Alone an experiment (the test tooling's
    # FROST_BWD_CHAIN=wgmma_wy); the product sets it under its four-role chain below.
    chain_wy: bool = False
    # With chain_wy: that chain in four roles (bwd_chain_ws4.py, NOTES_bwd.md "The wy chain
    # in four roles"): the chain, a math warpgroup (rows, the Gram on warpgroup MMA, the
    # inverses and solves) and a copy warpgroup. The product's for GDN at K = V = 128 with
    # bf16 io, with the two fields below (bwd.product_choice); FROST_BWD_CHAIN=wgmma_ws4 is
    # the test tooling's form without them.
    chain_ws4: bool = False
    # With chain_ws4: no W', the chain applies the inverse to its dR (bwd_chain_ws4.
    # FrostBwdChainWs4InChain). The product's with chain_ws4 (bwd.product_choice); the
    # test tooling's FROST_BWD_CHAIN=wgmma_ws4c without raw rows.
    chain_a_in_chain: bool = False
    # With chain_ws4: raw q / k / gate / beta rows in a ring, the norms on the copies and in
    # the factor rows, no rows stage (bwd_chain_ws4.FrostBwdChainWs4Raw). The product's
    # with chain_ws4 (bwd.product_choice); the test tooling's FROST_BWD_CHAIN=wgmma_ws4raw
    # with W'.
    chain_raw_rows: bool = False
    # The vector-gate chain copies the next chunk's dO rows (cp.async, under this chunk's
    # chain step) into KE's shared slot, dead then, and its rows stage reads them from
    # there instead of from global memory (bwd_chain.do_stage; NOTES_bwd.md "Vector-gate
    # chain: dO staged in shared memory"). Same values. Vector gates, K >= V (KE's rows
    # hold V values). The product's where it applies (bwd.product_choice; the test
    # tooling's FROST_BWD_CHAIN_DO=0 turns it off).
    chain_staged_do: bool = False
    # The vector-gate chain copies the next chunk's rows (q, k, the gate rows, GDN-2's b and
    # w, the staged dO) by 1D bulk copies, one per row, completing on an mbarrier
    # (bulk_rows.py), instead of 16-20 16-byte cp.async per thread issued ahead of the
    # chain step, whose shared-memory queue waits on them (NOTES_bwd.md "Vector-gate chain:
    # the next chunk's rows by bulk copies"). Same values. Vector gates. The product's
    # (bwd.product_choice; the test tooling's FROST_BWD_CHAIN_BULK=0 turns it off).
    chain_bulk_rows: bool = False
    # The vector-gate grads kernel (bwd_grads_vec.py) reads its shared bf16 operands with
    # wide loads instead of one 2-byte load per element (NOTES_bwd.md "v1.7 vector-gate
    # grads"): k-hat's and q-hat's decayed B operands by ldmatrix.x4.trans straight into
    # the hi fragment, q-hat, k-hat, b at accumulator positions as bf16 pairs, S dS by
    # ldmatrix.trans. Same values; only the S dS sum's order changes. Off: v1.6's loads.
    # The product's (bwd.product_choice; the test tooling's FROST_BWD_VEC_WIDE=0 clears it).
    vec_wide_loads: bool = False
    # The vector-gate grads kernel builds its decayed score-adjoint operands with fewer
    # instructions (NOTES_bwd.md "v1.9 vector-gate grads: fused decay exponent"): the
    # exponent as one FFMA with log2 e folded into the reference gate per channel, the
    # bf16 hi + lo split by packed conversions. The split is bitwise the same; the
    # exponent rounds differently (frost_bwd_precision models it). The product's
    # (bwd.product_choice; the test tooling's FROST_BWD_VEC_DECAY=0 clears it).
    vec_fast_decay: bool = False
    # The vector-gate grads kernel (per-chunk, mma.sync products) fills its load phase with
    # 1D bulk copies (cp.async.bulk, one instruction per row of dO, U, dR, v, w, the gate
    # rows, S and dS, completing on one mbarrier) instead of ~40 16-byte cp.async per
    # thread: the load phase waited on its instruction queue (NOTES_bwd.md "Vector-gate
    # grads: the load phase by bulk copies"). Same bytes, same values. The product's for
    # GDN-2, not KDA (slower there; bwd.product_choice); the test tooling's
    # FROST_BWD_VEC_BULK=0 / 1 turns it off / on for both.
    vec_bulk_copies: bool = False
    # The vector-gate grads kernel (mma.sync class) runs its score adjoints' products on the
    # tf32 warp MMA: each decayed operand value rounded once to tf32 (10-bit mantissa)
    # instead of split into a bf16 hi + lo pair for two bf16 MMAs, so the pair's packed
    # conversions, the hi's unpacking and the subtraction leave the element loop; the
    # scores (A) widen from bf16 exactly (tf32_fragments.py; NOTES_bwd.md "Vector-gate
    # grads: the decayed operands in tf32"). Needs vec_wide_loads and vec_fast_decay. The
    # product's (bwd.product_choice; the test tooling's FROST_BWD_VEC_TF32=0 clears it).
    vec_tf32_adjoints: bool = False
    # The grads kernel runs its three state products (dO S^T, dR S^T, U dS^T) on warpgroup
    # MMA, both operands from swizzled shared tiles, while the warps compute the score
    # tiles (scalar gates: bwd_grads_wgmma.py, NOTES_bwd.md v1.8; vector gates:
    # bwd_grads_vec.FrostBwdGradsVecWgmma, "Vector-gate grads: state products on warpgroup
    # MMA"). Off: the per-warp mma.sync products. The product's for scalar gates
    # (bwd.product_choice); the test tooling's FROST_BWD_GRADS=mma clears it there,
    # FROST_BWD_GRADS_VEC=wgmma sets it for vector gates.
    grads_wgmma: bool = False
    # The persistent scalar-gate grads kernel asks L2 for the next item's q and k rows
    # (prefetch.global.L2) when it issues that item's copies: its norms pass reads them
    # with plain loads, which the Nsight Compute profile (NOTES_bwd.md "The grads kernels
    # under Nsight Compute") puts among its ~17 % global-load waits; with them the rows
    # its dO, U, dR and v copies read, and at each item's end the state rows (dS, and S on
    # the recompute path) of the item after next, whose copy burst otherwise waited on
    # DRAM (NOTES_bwd.md "GDN grads: the state rows two items ahead"). A hint only: the
    # same gradients, bitwise. Scalar gates only: the vector-gate kernel's prefetch of
    # the next wave's rows made it slower on the H200 (NOTES_bwd.md "The L2 prefetch on
    # the H200"); its requests for its own chunk's later rows
    # (bwd_grads_vec.prefetch_operand_rows) are always on, not this switch.
    # The product's (bwd.product_choice; the test tooling's FROST_BWD_GRADS_PREFETCH=0
    # clears it).
    grads_prefetch: bool = False

    def __post_init__(self):
        def bad(name, expected):
            raise ValueError(f"FrostBwdConfig: {name} must be {expected}, got {getattr(self, name)!r}")

        if isinstance(self.chain_ws_regs, list):  # JSON sidecars give lists: hashable again
            object.__setattr__(self, "chain_ws_regs", tuple(self.chain_ws_regs))

        if self.stage not in ALL_STAGES:
            bad("stage", f"one of {ALL_STAGES}")
        if self.stage == "states" and self.checkpoints:
            bad("checkpoints", "False for the states stage (it writes the states itself)")
        if self.stage == "values" and not self.checkpoints:
            bad("checkpoints", "True for the values stage (it reads the forward's checkpoints)")
        if self.forward_values and self.stage in ("states", "values"):
            bad("forward_values", f"False for the {self.stage} stage (it writes U itself)")
        if self.forward_values and self.stage == "grads":
            bad("forward_values", "False for the grads stage (it reads U wherever it comes from: with_stage)")
        if self.fwd.has_final_state:
            bad("fwd", "a forward config without a final state")
        for name in ("dht_dtype", "dh0_dtype"):
            if getattr(self, name) not in (None, *STATE_DTYPES):
                bad(name, f"None or one of {STATE_DTYPES}")
        if (self.dh0_dtype is not None) != self.fwd.has_initial_state:
            bad("dh0_dtype", "set exactly when the forward has an initial state")
        if not isinstance(self.grads_ctas, int) or self.grads_ctas < 1:
            bad("grads_ctas", "a positive int (the device's SM count)")
        if not isinstance(self.vec_wide_loads, bool):
            bad("vec_wide_loads", "a bool")
        if not isinstance(self.vec_fast_decay, bool):
            bad("vec_fast_decay", "a bool")
        if not isinstance(self.vec_bulk_copies, bool):
            bad("vec_bulk_copies", "a bool")
        if not isinstance(self.vec_tf32_adjoints, bool):
            bad("vec_tf32_adjoints", "a bool")
        if self.vec_tf32_adjoints and not (self.vec_wide_loads and self.vec_fast_decay and not self.grads_wgmma):
            bad("vec_tf32_adjoints", "False unless vec_wide_loads and vec_fast_decay are set, without grads_wgmma")
        if not isinstance(self.chain_staged_do, bool):
            bad("chain_staged_do", "a bool")
        if self.chain_staged_do and not (self.fwd.gate_per_channel and self.fwd.K >= self.fwd.V):
            bad("chain_staged_do",
                "False unless the gates are per channel with K >= V (KE's slot holds the rows)")
        if not isinstance(self.chain_bulk_rows, bool):
            bad("chain_bulk_rows", "a bool")
        if self.chain_bulk_rows and not self.fwd.gate_per_channel:
            bad("chain_bulk_rows", "False unless the gates are per channel (the vector chain's copies)")
        if self.chain_pipeline and self.fwd.gate_per_channel:
            bad("chain_pipeline", "False for vector gates (no room for a second operand set: NOTES_bwd.md v1.6)")
        if not isinstance(self.chain_wgmma, bool):
            bad("chain_wgmma", "a bool")
        if not isinstance(self.grads_wgmma, bool):
            bad("grads_wgmma", "a bool")
        if not isinstance(self.grads_prefetch, bool):
            bad("grads_prefetch", "a bool")
        if self.grads_prefetch and self.fwd.gate_per_channel:
            bad("grads_prefetch", "False for vector gates (scalar gates only: NOTES_bwd.md \"The L2 prefetch on the H200\")")
        if self.chain_wgmma and self.chain_pipeline:
            bad("chain_wgmma", "False when chain_pipeline is set (one chain variant at a time)")
        if not isinstance(self.chain_async, bool):
            bad("chain_async", "a bool")
        if self.chain_async and not self.chain_wgmma:
            bad("chain_async", "False unless chain_wgmma is set (it is a schedule of the wgmma chain)")
        if not isinstance(self.chain_scaled, bool):
            bad("chain_scaled", "a bool")
        if self.chain_scaled and not (self.chain_wgmma and not self.fwd.gate_per_channel
                                      and self.fwd.io_dtype == "bfloat16"):
            bad("chain_scaled", "False unless chain_wgmma is set, with scalar gates and bf16 io")
        if not isinstance(self.chain_ws, bool):
            bad("chain_ws", "a bool")
        if self.chain_ws and not (self.chain_scaled and (self.fwd.K, self.fwd.V) == (128, 128)):
            bad("chain_ws", "False unless chain_scaled is set, at K = V = 128")
        if not isinstance(self.chain_wy, bool):
            bad("chain_wy", "a bool")
        if self.chain_wy and not self.chain_ws:
            bad("chain_wy", "False unless chain_ws is set (it is that chain's consumer step)")
        if not isinstance(self.chain_ws4, bool):
            bad("chain_ws4", "a bool")
        if self.chain_ws4 and not (self.chain_wy and not self.chain_ws_regs):
            bad("chain_ws4", "False unless chain_wy is set, with chain_ws_regs () (its split is its own)")
        if not isinstance(self.chain_a_in_chain, bool):
            bad("chain_a_in_chain", "a bool")
        if self.chain_a_in_chain and not self.chain_ws4:
            bad("chain_a_in_chain", "False unless chain_ws4 is set (the four-role chain without W')")
        if not isinstance(self.chain_raw_rows, bool):
            bad("chain_raw_rows", "a bool")
        if self.chain_raw_rows and not self.chain_ws4:
            bad("chain_raw_rows", "False unless chain_ws4 is set (the four-role chain on raw rows)")
        if self.chain_ws_regs and not (self.chain_ws and register_split_ok(self.chain_ws_regs)):
            bad("chain_ws_regs", "() or, with chain_ws, (consumer, producer) setmaxnreg counts: multiples of 8 "
                "in [24, 256] with 256 x (consumer + producer) <= 65,536")

    def with_stage(self, stage: str) -> "FrostBwdConfig":
        """The config of one stage's kernel, without what that kernel never reads (so
        backward calls that differ only there share the kernel): states reads no state
        gradient, grads neither states nor state gradients, values (its state comes from a
        checkpoint) neither; chain never reads a state, so the checkpoints flag is off
        (forward_values stays: it makes chain zero the uncovered gradient rows); grads
        reads U from wherever it comes, so forward_values is off there. chain_pipeline,
        chain_wgmma, chain_async, chain_staged_do and chain_bulk_rows only change the chain
        kernel: off for every other stage;
        vec_wide_loads, vec_fast_decay, vec_bulk_copies and vec_tf32_adjoints only the
        vector-gate grads kernel (vec_bulk_copies only its mma.sync class), grads_wgmma and
        grads_prefetch only the grads kernels."""
        persistent = stage == "grads" and not self.fwd.gate_per_channel
        ctas = self.grads_ctas if persistent else DEFAULT_GRADS_CTAS
        wide = self.vec_wide_loads and stage == "grads" and self.fwd.gate_per_channel
        gwg = self.grads_wgmma and stage == "grads"
        fast = self.vec_fast_decay and stage == "grads" and self.fwd.gate_per_channel
        bulk = self.vec_bulk_copies and stage == "grads" and self.fwd.gate_per_channel and not self.grads_wgmma
        tf32 = self.vec_tf32_adjoints and stage == "grads" and self.fwd.gate_per_channel
        pf = self.grads_prefetch and stage == "grads"
        # fwd.pipelined picks the recompute path's states kernel (the forward's), never a
        # backward kernel: off, so long and short batches share those
        unpiped = dataclasses.replace(self.fwd, pipelined=False)
        if stage == "chain":
            return dataclasses.replace(self, fwd=unpiped, stage=stage, checkpoints=False, grads_ctas=ctas,
                                       vec_wide_loads=wide, vec_fast_decay=fast, vec_bulk_copies=bulk, vec_tf32_adjoints=tf32, grads_wgmma=gwg,
                                       grads_prefetch=pf)
        if stage == "states":
            return dataclasses.replace(self, fwd=unpiped, stage=stage, dht_dtype=None, grads_ctas=ctas,
                                       chain_pipeline=False, chain_wgmma=False,
                                       chain_async=False, chain_scaled=False, chain_ws=False,
                                       chain_ws_regs=(), chain_wy=False, chain_ws4=False,
                                       chain_a_in_chain=False, chain_raw_rows=False, chain_staged_do=False,
                                       chain_bulk_rows=False, vec_wide_loads=wide, vec_fast_decay=fast, vec_bulk_copies=bulk,
                                       vec_tf32_adjoints=tf32, grads_wgmma=gwg, grads_prefetch=pf)
        fwd = dataclasses.replace(unpiped, has_initial_state=False, state_dtype=None)
        return dataclasses.replace(self, fwd=fwd, stage=stage, dht_dtype=None, dh0_dtype=None,
                                   forward_values=False, grads_ctas=ctas,
                                   chain_pipeline=False, chain_wgmma=False, chain_async=False, chain_scaled=False,
                                   chain_ws=False, chain_ws_regs=(), chain_wy=False, chain_ws4=False,
                                   chain_a_in_chain=False, chain_raw_rows=False, chain_staged_do=False,
                                   chain_bulk_rows=False, vec_wide_loads=wide,
                                   vec_fast_decay=fast, vec_bulk_copies=bulk, vec_tf32_adjoints=tf32, grads_wgmma=gwg, grads_prefetch=pf)

    @property
    def stages(self) -> tuple[str, ...]:
        """The kernels one backward call launches, in order."""
        if self.forward_values:
            return FORWARD_VALUES_STAGES
        return CHECKPOINT_STAGES if self.checkpoints else STAGES

    # -- derived ----------------------------------------------------------------------
    @property
    def family(self) -> str:
        return self.fwd.family

    @property
    def HO(self) -> int:
        return self.fwd.HO

    @property
    def q_grouped(self) -> bool:
        """dq is summed over HO // H output heads: the kernel writes fp32 per output head."""
        return self.fwd.H != self.HO

    @property
    def k_grouped(self) -> bool:
        return self.fwd.HK != self.HO

    @property
    def v_grouped(self) -> bool:
        return self.fwd.HV != self.HO


BWD_OPERANDS = ("q", "k", "v", "g", "beta", "w", "cu_seqlens", "dO", "initial_state", "d_final_state",
                "dq", "dk", "dv", "dg", "dbeta", "dw", "d_initial_state", "ckpt", "dckpt", "u", "dr")


def bwd_operand_dtypes(cfg: FrostBwdConfig) -> dict[str, str]:
    """Element dtype of each backward operand, in launch order. dq/dk/dv are fp32 per output
    head where their heads are grouped (summed afterwards), else the io dtype; the
    workspace tensors (checkpoints, U, dR) are bf16, and so are the forward's checkpoints."""
    f = cfg.fwd
    io = f.io_dtype
    return {
        "q": io, "k": io, "v": io, "g": "float32", "beta": io if f.beta_per_channel else "float32",
        "w": io, "cu_seqlens": "int32", "dO": io, "initial_state": f.state_dtype or "float32",
        "d_final_state": cfg.dht_dtype or "float32",
        "dq": "float32" if cfg.q_grouped else io, "dk": "float32" if cfg.k_grouped else io,
        "dv": "float32" if cfg.v_grouped else io, "dg": "float32",
        "dbeta": io if f.beta_per_channel else "float32", "dw": io,
        "d_initial_state": cfg.dh0_dtype or "float32",
        "ckpt": "bfloat16", "dckpt": "bfloat16", "u": "bfloat16", "dr": "bfloat16",
    }


def bwd_operand_alignment(cfg: FrostBwdConfig) -> dict[str, int]:
    """16 bytes for 16-bit operands (vector accesses), 4 for 32-bit ones, 16 for g under
    the forward's gate_align16, and 16 for fp32 dq/dk/dv: those are only ever the
    workspace's per-output-head regions (bwd.workspace_layout, 256-byte aligned), which
    grads stores 16 bytes at a time."""
    align = {name: 4 if dt in ("float32", "int32") else 16 for name, dt in bwd_operand_dtypes(cfg).items()}
    for name in ("dq", "dk", "dv"):
        align[name] = 16
    if cfg.fwd.gate_align16:
        align["g"] = 16
    return align


def checkpoint_rows(T: int, N: int) -> int:
    """Rows of the per-chunk state workspaces: chunk j of sequence n lives at row
    cu[n] // CHUNK + n + j, which never collides and stays below T // CHUNK + N (the row
    count of the forward's state_checkpoints too, packed otherwise: checkpoints.py)."""
    return _rows(T, N)
