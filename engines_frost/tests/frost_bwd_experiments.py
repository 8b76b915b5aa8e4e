"""The FROST backward's experiment switches: bench and test switches, not product ones.

The product (kernels/bwd.py) builds one choice of backward kernels, bwd.product_choice's
(and the recompute path's states on the forward kernel, bwd.recompute_on_forward), and
reads no environment variable. The variants measured against it stay buildable (their
FrostBwdConfig fields and kernel classes are in the package: the product's chain derives
from them) and are picked here, for A/B runs and tests: `use_bwd_variants()` reads the
variables below on entry and, while the block lasts, wraps those two functions, so that
frost_bwd and bind_bwd (hence the engines, the plans and the torch ops) build what the
variables ask for. Nothing set: a no-op. la_frost_bwd_smoke.py and
bench_linear_attention.py enter it, so `FROST_BWD_X=... python3 <script>` A/Bs a switch
(tools/gpu/gpu_suite.sh, tree_ab.sh); a plain pytest run or a user's process sees none.

FROST_BWD_CHAIN (CHAIN_ENV): the scalar-gate (GDN) chain kernel, one of CHAIN_VARIANTS
  (kernels/NOTES_bwd.md has each one's measurements); unset: DEFAULT_CHAIN, the product's.
  serial        the per-warp mma.sync chain (bwd_chain.py);
  pipelined     the next chunk's prep beside this chunk's chain (chain_pipeline, v1.6);
  wgmma         dU and the dS update on warpgroup MMA (chain_wgmma, v1.7);
  wgmma_async   that with its dS update group retired after the next chunk's rows stage
                (chain_async, v1.10; the product's for fp16 io);
  wgmma_scaled  that with the decays as per-token factors, no folded operand tiles
                (chain_scaled; bf16 io, else wgmma_async; the product's at other shapes);
  wgmma_ws      that warp-specialised (chain_ws; K = V = 128 and bf16, else wgmma_scaled);
  wgmma_wy      that without its back substitution: the producer forms the chunk's
                inverse and W' (chain_wy; the same shapes);
  wgmma_ws4     the wy chain in four roles: chain, math, copies (chain_ws4);
  wgmma_ws4c    that without W', the chain applying the inverse (chain_a_in_chain);
  wgmma_ws4raw, wgmma_ws4rawc  both on raw rows in a ring, no rows stage (chain_raw_rows;
                wgmma_ws4rawc is the product's at K = V = 128 with bf16 io).
FROST_BWD_CHAIN_VEC (CHAIN_VEC_ENV): the vector-gate (KDA, GDN-2) chain, one of
  CHAIN_VEC_VARIANTS: wgmma (unset, the product's), serial, wgmma_async (flat for KDA).
  Scalar gates ignore it, vector gates FROST_BWD_CHAIN.
FROST_BWD_WS_REGS="consumer,producer" (WS_REGS_ENV): the setmaxnreg split of the wgmma_ws
  and wgmma_wy chains (chain_ws_regs); unset: the kernel's own. The four-role chains keep
  their own three-role split.
FROST_BWD_GRADS (GRADS_ENV): the scalar-gate grads kernel's state products, one of
  GRADS_VARIANTS: wgmma (unset, the product's, v1.8) or mma (per-warp mma.sync).
FROST_BWD_GRADS_VEC (GRADS_VEC_ENV): the same for vector gates: mma (unset, the
  product's) or wgmma (bitwise mma's gradients, no faster on the H200).
The rest take 0 or 1 (common.switches.binary_switch); unset is the product's:
FROST_BWD_GRADS_PREFETCH  the scalar-gate grads kernel's L2 prefetch of the next items'
  rows (grads_prefetch; unset: on; vector gates have none);
FROST_BWD_VEC_WIDE        the vector-gate grads' wide shared loads (vec_wide_loads; on);
FROST_BWD_VEC_DECAY       their fused decay exponent and packed conversions
  (vec_fast_decay; on);
FROST_BWD_VEC_TF32        their score adjoints on the tf32 warp MMA (vec_tf32_adjoints; on
  where the wide loads and fused decay are, with the mma grads);
FROST_BWD_VEC_BULK        their load phase by bulk copies (vec_bulk_copies; unset: GDN-2
  only, slower for KDA; 0 / 1: off / on for both);
FROST_BWD_CHAIN_DO        the vector-gate chain's dO staged in shared memory a chunk ahead
  (chain_staged_do; on where K >= V);
FROST_BWD_CHAIN_BULK      the vector-gate chain's next rows by 1D bulk copies
  (chain_bulk_rows; on);
FROST_BWD_RECOMPUTE_FORWARD  the recompute path's states stage on the forward kernel
  (bwd.recompute_configs; on); 0: on the backward's own states kernel.
A bad value is a ValueError naming the variable, raised when the block is entered.
Plain Python at import: no torch, no cutlass.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os

from cudnn.linear_attention.common.switches import binary_switch
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, parse_register_split

CHAIN_ENV = "FROST_BWD_CHAIN"
CHAIN_VARIANTS = ("serial", "pipelined", "wgmma", "wgmma_async", "wgmma_scaled", "wgmma_ws", "wgmma_wy",
                  "wgmma_ws4", "wgmma_ws4c", "wgmma_ws4raw", "wgmma_ws4rawc")
#: the product's scalar-gate chain at its shapes (bwd.product_choice; the fallbacks above elsewhere)
DEFAULT_CHAIN = "wgmma_ws4rawc"
#: the chains in four roles, and those without the back substitution (the four-role ones too)
FOUR_ROLE_CHAINS = ("wgmma_ws4", "wgmma_ws4c", "wgmma_ws4raw", "wgmma_ws4rawc")
WY_CHAINS = ("wgmma_wy",) + FOUR_ROLE_CHAINS
CHAIN_VEC_ENV = "FROST_BWD_CHAIN_VEC"
CHAIN_VEC_VARIANTS = ("serial", "wgmma", "wgmma_async")
DEFAULT_CHAIN_VEC = "wgmma"
WS_REGS_ENV = "FROST_BWD_WS_REGS"
GRADS_ENV = "FROST_BWD_GRADS"
GRADS_VEC_ENV = "FROST_BWD_GRADS_VEC"
GRADS_VARIANTS = ("mma", "wgmma")
GRADS_PREFETCH_ENV = "FROST_BWD_GRADS_PREFETCH"
VEC_WIDE_ENV = "FROST_BWD_VEC_WIDE"
VEC_DECAY_ENV = "FROST_BWD_VEC_DECAY"
VEC_TF32_ENV = "FROST_BWD_VEC_TF32"
VEC_BULK_ENV = "FROST_BWD_VEC_BULK"
CHAIN_DO_ENV = "FROST_BWD_CHAIN_DO"
CHAIN_BULK_ENV = "FROST_BWD_CHAIN_BULK"
RECOMPUTE_FORWARD_ENV = "FROST_BWD_RECOMPUTE_FORWARD"


@dataclasses.dataclass(frozen=True)
class BwdVariants:
    """What the switches ask for (module docstring); the defaults are the product's, i.e.
    every variable unset. vec_bulk None: the product's per family (GDN-2 only)."""

    chain: str = DEFAULT_CHAIN
    chain_vec: str = DEFAULT_CHAIN_VEC
    ws_regs: tuple[int, ...] = ()
    grads: str = "wgmma"
    grads_vec: str = "mma"
    grads_prefetch: bool = True
    vec_wide: bool = True
    vec_decay: bool = True
    vec_tf32: bool = True
    vec_bulk: bool | None = None
    chain_do: bool = True
    chain_bulk: bool = True
    recompute_forward: bool = True

    def __post_init__(self):
        for name, env, choices in (("chain", CHAIN_ENV, CHAIN_VARIANTS), ("chain_vec", CHAIN_VEC_ENV, CHAIN_VEC_VARIANTS),
                                   ("grads", GRADS_ENV, GRADS_VARIANTS), ("grads_vec", GRADS_VEC_ENV, GRADS_VARIANTS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{env} must be one of {choices}, got {getattr(self, name)!r}")

    @property
    def label(self) -> str:
        """The fields that differ from the product's, for a bench's header line."""
        product = BwdVariants()
        changed = [f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                   if getattr(self, f.name) != getattr(product, f.name)]
        return ", ".join(changed) or "product"


def _choice(env: str, choices: tuple[str, ...], default: str) -> str:
    name = os.environ.get(env, "").strip() or default
    if name not in choices:
        raise ValueError(f"{env} must be one of {choices}, got {name!r}")
    return name


def requested() -> BwdVariants:
    """The variants the environment asks for (BwdVariants() when none is set); a bad value
    is a ValueError naming its variable."""
    bulk = os.environ.get(VEC_BULK_ENV, "").strip()
    return BwdVariants(
        chain=_choice(CHAIN_ENV, CHAIN_VARIANTS, DEFAULT_CHAIN),
        chain_vec=_choice(CHAIN_VEC_ENV, CHAIN_VEC_VARIANTS, DEFAULT_CHAIN_VEC),
        ws_regs=parse_register_split(os.environ.get(WS_REGS_ENV, ""), WS_REGS_ENV),
        grads=_choice(GRADS_ENV, GRADS_VARIANTS, "wgmma"),
        grads_vec=_choice(GRADS_VEC_ENV, GRADS_VARIANTS, "mma"),
        grads_prefetch=binary_switch(GRADS_PREFETCH_ENV, default=True),
        vec_wide=binary_switch(VEC_WIDE_ENV, default=True),
        vec_decay=binary_switch(VEC_DECAY_ENV, default=True),
        vec_tf32=binary_switch(VEC_TF32_ENV, default=True),
        vec_bulk=None if not bulk else binary_switch(VEC_BULK_ENV, default=False),
        chain_do=binary_switch(CHAIN_DO_ENV, default=True),
        chain_bulk=binary_switch(CHAIN_BULK_ENV, default=True),
        recompute_forward=binary_switch(RECOMPUTE_FORWARD_ENV, default=True))


def config_fields(f: FrostFwdConfig, v: BwdVariants) -> dict:
    """The kernel-choice fields of the FrostBwdConfig for the forward config f under the
    variants v (bwd.product_choice's keys; BwdVariants() gives the product's): a chain
    asked for where it does not apply falls back as the module docstring says."""
    vector = f.gate_per_channel
    variant = v.chain_vec if vector else v.chain
    chain_ws = variant in ("wgmma_ws",) + WY_CHAINS and f.io_dtype == "bfloat16" and (f.K, f.V) == (128, 128)
    chain_ws4 = chain_ws and variant in FOUR_ROLE_CHAINS
    return dict(
        chain_pipeline=variant == "pipelined" and not vector,
        chain_wgmma=variant in ("wgmma", "wgmma_async", "wgmma_scaled", "wgmma_ws") + WY_CHAINS,
        chain_async=variant in ("wgmma_async", "wgmma_scaled", "wgmma_ws") + WY_CHAINS,
        chain_scaled=variant in ("wgmma_scaled", "wgmma_ws") + WY_CHAINS and f.io_dtype == "bfloat16",
        chain_ws=chain_ws, chain_wy=chain_ws and variant in WY_CHAINS, chain_ws4=chain_ws4,
        chain_a_in_chain=chain_ws4 and variant in ("wgmma_ws4c", "wgmma_ws4rawc"),
        chain_raw_rows=chain_ws4 and variant in ("wgmma_ws4raw", "wgmma_ws4rawc"),
        chain_ws_regs=v.ws_regs if chain_ws and not chain_ws4 else (),
        chain_staged_do=v.chain_do and vector and f.K >= f.V,
        chain_bulk_rows=v.chain_bulk and vector,
        grads_wgmma=(v.grads_vec if vector else v.grads) == "wgmma",
        grads_prefetch=v.grads_prefetch and not vector,
        vec_wide_loads=v.vec_wide and vector,
        vec_fast_decay=v.vec_decay and vector,
        vec_tf32_adjoints=v.vec_tf32 and v.vec_wide and v.vec_decay and vector and v.grads_vec != "wgmma",
        vec_bulk_copies=(f.beta_per_channel if v.vec_bulk is None else v.vec_bulk) and vector)


@contextlib.contextmanager
def use_bwd_variants(variants: BwdVariants | None = None):
    """Inside the block, the FROST backward builds `variants` (None: requested(), the
    environment's, read on entry): bwd.product_choice and bwd.recompute_on_forward, the
    launcher's seams, are wrapped, so every operand check still runs. Blocks nest (the
    inner one's variants hold inside it); process-wide while it lasts (not for concurrent
    threads). A backward bound earlier (a cached call's launch lane) keeps its kernels.
    The product's variants outside any block: nothing is wrapped."""
    variants = requested() if variants is None else variants
    from cudnn.linear_attention.frost.kernels import bwd

    if variants == BwdVariants() and not hasattr(bwd.product_choice, "variants"):
        yield  # what the product builds anyway (no outer block to override)
        return
    product = bwd.product_choice, bwd.recompute_on_forward

    def choice(f):
        return config_fields(f, variants)

    choice.variants = variants  # marks the wrapper (and tells a reader what it builds)
    bwd.product_choice = choice
    bwd.recompute_on_forward = lambda cfg: variants.recompute_forward
    try:
        yield
    finally:
        bwd.product_choice, bwd.recompute_on_forward = product
