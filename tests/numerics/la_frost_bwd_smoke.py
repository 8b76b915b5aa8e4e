"""FROST backward on the GPU: every gradient vs float64, determinism, and timing.

    python3 tests/numerics/la_frost_bwd_smoke.py [--family gdn] [--jobs 16] [--no-time]
                                                 [--no-checkpoints] [--no-values]
                                                 [--chain serial|pipelined|wgmma|wgmma_async|both|wgmma-both
                                                          |wgmma_async-both]
                                                 [--chain-vec serial|wgmma|wgmma_async|wgmma-both|wgmma_async-both]
                                                 [--grads mma|wgmma|wgmma-both]
                                                 [--grads-vec mma|wgmma|wgmma-both]
                                                 [--fwd-kernel product|pipelined|wgmma]

1. Precompiles every kernel the run needs in parallel processes into a kernel store
   (FROST_KERNEL_CACHE, default .frostcache), so the cases below load instead of compile.
2. Per case (mixed lengths 0/1/63/64/65/1000, grouped heads, K/V 64/128, initial state,
   d_final_state, l2norm, correlated keys), frost_bwd's dq, dk, dv, dg, dbeta (dw) and
   d_initial_state against the float64 reference backward (autograd through the token
   recurrence), relative error bound 1e-2 (1.5e-2 for correlated keys); a second run
   must be bitwise identical.
   Unless --no-checkpoints, every case again on the training path of v1.2: the forward
   writes state_checkpoints (cadence 64, into a NaN-filled buffer) and the backward reads
   them (kernel ``values`` instead of ``states``): the forward's output must be bitwise
   the plain forward's where both run one kernel layer (one_forward_kernel: the product
   picks one layer for both, wgmma for bf16 on sm_90a, and --fwd-kernel routes both; a
   rule that split them would get FWD_ROUNDING_BOUND instead), the written rows must
   match the float64 model of the checkpoints
   (frost_bwd_model.forward_checkpoints_model, same bound) and the unwritten ones stay NaN, the
   gradients must pass the same bounds, be deterministic, and are reported against the
   recompute path's (vs_recompute, relative).
   Unless --no-values (or --no-checkpoints), every case a third time on the training path
   of v1.3 ([ckpt+U]): the forward writes U per token too (into a NaN-filled buffer) and
   the backward runs only chain and grads: O and the checkpoints must be bitwise those of
   the checkpoint-only forward, U within the bound of the float64 model
   (frost_bwd_model.forward_values_model) on every covered row, rows no sequence covers
   NaN, the gradients deterministic, and U and the gradients bitwise the recompute path's
   (U_vs_states=0, vs_recompute=0) where the forward writing U is pipelined (mma.sync, as the
   backward's states kernel), within FWD_ROUNDING_BOUND where it is wgmma (values_on_wgmma:
   the product's on sm_90a; bitwise= says whether they were bitwise anyway), twice
   that where its chain has the decays as factors (values_scaled: the product's for GDN;
   other rounding points than the states kernel's).
3. Timing (unless --no-time), 8 x 4096 tokens, 16 heads, K = V = 128, bf16, CUDA events,
   median: the forward, each backward kernel, and the whole backward; and the
   checkpointed path: the forward writing checkpoints, bwd[values], the backward from
   them, and forward + backward both ways; and the v1.3 path: the forward writing
   checkpoints and U (fwd[ckpt+U]), the backward from them (bwd[U] = chain + grads) and
   fwd+bwd[U].
4. --chain (FROST_BWD_CHAIN for the whole run; default: the environment's, else the product's)
   picks the chain kernel (NOTES_bwd.md v1.6, v1.7; scalar gates only: KDA / GDN-2 follow
   --chain-vec). ``both`` runs everything on the pipelined chain, adds a [chains]
   check per GDN case (recompute path: every gradient bitwise the serial chain's) and times
   bwd[chain] with the serial chain too. ``wgmma-both`` does the same for the wgmma chain,
   whose sums run in another order: its [chains] check bounds every gradient's difference
   from the serial chain's (||diff|| / ||serial||, tests.reference.compare.rel_err) by
   CHAIN_ROUNDING_BOUND instead.
   --chain-vec (FROST_BWD_CHAIN_VEC; default: the environment's, else the product's:
   wgmma) picks the KDA / GDN-2 chain kernel (NOTES_bwd.md "Vector-gate chain on
   warpgroup MMA"): ``wgmma`` the wgmma chain, ``wgmma-both`` that on every vector-gate
   case and path plus the same [chains wgmma] line per KDA / GDN-2 case against the
   serial chain and TIME bwd[chain, serial].
   ``wgmma_async`` (either option) is the wgmma chain with its dS update group retired
   after the next chunk's rows (GDN: and Gram) stage (NOTES_bwd.md v1.10);
   ``wgmma_async-both`` runs everything on it, and its [chains wgmma_async] line is
   against the synchronous wgmma chain (CHAIN_BASELINE), every gradient bitwise (the same
   products in the same order), with TIME bwd[chain, wgmma] beside bwd[chain].
5. --grads (FROST_BWD_GRADS for the whole run; default: the environment's, else the product's: wgmma) picks
   the grads kernel (NOTES_bwd.md v1.8: ``wgmma`` runs the state products on warpgroup
   MMA; scalar gates only, KDA / GDN-2 always run theirs). ``wgmma-both`` runs everything
   on the wgmma grads kernel, adds a [grads wgmma] check per GDN case (recompute path:
   each gradient's difference from the mma.sync kernel's, ||diff|| / ||mma||, within
   GRADS_ROUNDING_BOUND; dv is bitwise, as the products do not enter it) and times
   bwd[grads] with the mma.sync kernel too (TIME bwd[grads, mma]).
   --grads-vec (FROST_BWD_GRADS_VEC; default: the environment's, else the product's: mma)
   does the same for KDA / GDN-2 (NOTES_bwd.md "Vector-gate grads: state products on
   warpgroup MMA"): ``wgmma`` the wgmma grads kernel, ``wgmma-both`` that on every
   vector-gate case and path plus a [grads wgmma] line per KDA / GDN-2 case against the
   mma.sync kernel (same bound; bitwise= says whether every gradient is bitwise equal, as
   the products' k16 order is the same) and TIME bwd[grads, mma].
6. --fwd-kernel (default product: wgmma for every forward on sm_90a, plain and training, bf16
   and fp16; pipelined on other archs) forces one forward layer on every forward call of the run, the training
   ones (checkpoints, U) included, through the test tooling (frost_fwd_experiments.use_kernel
   with training=True; the kernels are precompiled as that layer). Where the checkpoints
   and U come from fwd_wgmma's training launchers (kernels/NOTES.md "v3 training forward",
   "v3 training forwards on the H200") their products run in the tensor core's wgmma
   order while the backward's states kernel (the recompute path) runs mma.sync, so
   [ckpt+U] requires U and the gradients within FWD_ROUNDING_BOUND of the recompute path's
   instead of bitwise (and prints bitwise=, predicted True: the H200 summed the
   backward's wgmma and mma.sync products bitwise alike). ``pipelined`` puts every forward on pipelined,
   the product's training forward before the wgmma layer's launchers (the A/B); with any forced
   layer the timing adds TIME fwd[ckpt+U, product] and fwd+bwd[U, product] (the
   product's training forward in the same process).
The FROST_BWD_* switches (engines_frost/tests/frost_bwd_experiments.py, the test tooling:
the product reads none) reach every backward this script runs (run_bwd, configs_of).
Prints one line per case and a SUMMARY; exits 1 on any failure.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for root in ("bench", "torch_ops", "backend_cc", "engines_frost", "engines_common", "engines_cutile", "router",
             "ir", "ops", "engines_frost/tests", "."):
    if str(REPO / root) not in sys.path:
        sys.path.insert(0, str(REPO / root))


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    seq_lens: tuple[int, ...]
    H: int
    HV: int
    K: int
    V: int
    HK: int | None = None
    h0: bool = False
    dht: bool = False
    l2norm: bool = False
    correlated: bool = False
    dtype: str = "bfloat16"  # q, k, v, dO (torch dtype name)
    decay: float = 1.0  # the log-gates are multiplied by it (strong decay: > 1)


CASES = [
    Case("mixed", (1, 63, 64, 65, 0, 1000), 4, 4, 128, 128, h0=True, dht=True),
    Case("plain", (200, 77), 4, 4, 128, 128),
    Case("l2norm", (130, 64, 1), 4, 4, 128, 128, l2norm=True, dht=True),
    Case("vgroups", (300, 65), 2, 4, 128, 128, h0=True),
    Case("qgroups", (129, 40), 4, 2, 128, 64, HK=4, dht=True),
    Case("k64v64", (150, 64, 3), 4, 4, 64, 64, h0=True, dht=True, l2norm=True),
    Case("k64v128", (100, 17), 2, 2, 64, 128),
    Case("correlated", (256, 100), 2, 2, 128, 128, l2norm=True, correlated=True),
    # many short sequences (0-16 tokens: more sequences than chunks) and an initial state
    Case("manyshort", tuple((i * 7) % 17 for i in range(40)), 4, 4, 64, 64, h0=True, dht=True),
    # fp32 dq/dk per output head at K = 64 (grads stages both tiles at once), and fp16 io
    # (dO lands raw by cp.async and is converted in place)
    Case("k64groups", (90, 64, 5), 2, 4, 64, 64, dht=True, l2norm=True),
    Case("fp16", (150, 40), 4, 4, 128, 128, h0=True, dht=True, l2norm=True, dtype="float16"),
    # the persistent grads kernel (one CTA per SM, FrostBwdConfig.grads_ctas): several items per CTA
    # (38 rows x 16 heads = 608 items), the next item's copies issued during the current one,
    # a row no sequence owns (the empty sequence) skipped between them; the first case has
    # the timing case's config (no extra kernels), the second fp16 io (dO prefetched raw,
    # converted in place) with fp32 dq/dk per output head at K = 128
    Case("persistent", (700, 0, 63, 1100, 65, 130), 16, 16, 128, 128),
    Case("persistfp16", (500, 0, 900, 33), 4, 16, 128, 128, h0=True, dht=True, l2norm=True, dtype="float16"),
    # strong decay (~6 nats per token and channel): the vector-gate grads kernel's 16-row
    # blocks span more than SPAN_LIMIT = 80 nats and take exact_diagonal (a loop since
    # v1.5, unrolled and spilling before); the correlated case's kernels (no extra builds)
    Case("strongdecay", (200, 64, 33), 2, 2, 128, 128, l2norm=True, decay=8.0),
]
FAMILIES = ("gdn", "kda", "gdn2")
# vector-gate families run a subset (their kernels take longer to build)
VECTOR_CASES = ("mixed", "l2norm", "vgroups", "k64v64", "correlated", "manyshort", "strongdecay")


def cases_for(family: str, only: str | None) -> list[Case]:
    return [c for c in CASES if only in (None, c.name) and (family == "gdn" or c.name in VECTOR_CASES)]


def make_case(case: Case, family: str, device: str, seed: int = 0):
    import torch

    from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
    from tests.reference.preprocess import Family

    cfg = InputConfig(family=Family(family), seq_lens=case.seq_lens, H=case.H, HK=case.HK, HV=case.HV, K=case.K,
                      V=case.V, dtype=getattr(torch, case.dtype), state_dtype=torch.float32, use_qk_l2norm=case.l2norm,
                      with_initial_state=case.h0, device=device)
    x = make_inputs(cfg, seed)
    if case.correlated:  # keys at cosine ~0.8 with one another, beta >= 0.5, slow decay
        gen = torch.Generator(device="cpu").manual_seed(seed + 7)
        base = torch.randn(1, x.k.shape[1], x.k.shape[2], generator=gen)
        k = 0.8 * base + 0.6 * torch.randn(x.k.shape, generator=gen)
        x = dataclasses.replace(x, k=k.to(device=device, dtype=x.k.dtype),
                                beta=(0.5 + 0.5 * torch.rand(x.beta.shape, generator=gen)).to(device=device,
                                                                                              dtype=x.beta.dtype),
                                g=(-0.02 * torch.rand(x.g.shape, generator=gen)).to(device=device, dtype=x.g.dtype))
    if case.decay != 1.0:
        x = dataclasses.replace(x, g=x.g * case.decay)
    dO, dht = make_grad_outputs(cfg, seed + 1)
    return cfg, x, dO, (dht if case.dht else None)


def grads_buffers(x, device):
    import torch

    HO, V, K = max(x.q.shape[1], x.v.shape[1]), x.v.shape[2], x.q.shape[2]
    N = x.cu_seqlens.numel() - 1
    return dict(dq=torch.empty_like(x.q), dk=torch.empty_like(x.k), dv=torch.empty_like(x.v),
                dg=torch.empty_like(x.g), dbeta=torch.empty_like(x.beta),
                dw=None if x.w is None else torch.empty_like(x.w),
                d_initial_state=None if x.initial_state is None else torch.empty(N, HO, V, K, device=device,
                                                                                 dtype=x.initial_state.dtype))


def run_bwd(x, dO, dht, l2norm: bool, out: dict, workspace=None, stages=None, checkpoints=None, values=None):
    """frost_bwd into `out`; with `checkpoints` (the forward's state_checkpoints) the
    values path, with `values` as well (the forward's U) the chain + grads path. Returns
    the workspace (allocated at its exact size when not given)."""
    import torch

    from cudnn.linear_attention.frost.kernels.bwd import frost_bwd, frost_bwd_workspace_size
    from frost_bwd_experiments import use_bwd_variants

    T, K = x.q.shape[0], x.q.shape[2]
    N = x.cu_seqlens.numel() - 1
    if workspace is None:
        size = frost_bwd_workspace_size(total_tokens=T, num_seqs=N, heads_q=x.q.shape[1], heads_k=x.k.shape[1],
                                        heads_v=x.v.shape[1], head_dim_k=K, head_dim_v=x.v.shape[2],
                                        checkpoints=checkpoints is not None, values=values is not None)
        workspace = torch.empty(max(size, 1), dtype=torch.uint8, device=x.q.device)
    with use_bwd_variants():  # the FROST_BWD_* switches, read per call (env_set changes them)
        frost_bwd(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens, dO=dO,
                  initial_state=x.initial_state, d_final_state=dht, workspace=workspace, scale=1.0 / math.sqrt(K),
                  use_l2norm=l2norm, gate_per_channel=x.g.dim() == 3, beta_per_channel=x.beta.dim() == 3,
                  stream=None, stages=stages, state_checkpoints=checkpoints, values=values, **out)
    return workspace


# the forward layer of every forward call (--fwd-kernel; frost_fwd_experiments.PRODUCT: the
# product's picks) and what a wgmma training forward's U and gradients may differ from the
# recompute path's by (relative, tests.reference.compare.rel_err): the same bf16 rounding
# points, the products' fp32 sums in the wgmma order (as CHAIN_ROUNDING_BOUND)
FWD_KERNEL = "product"
FWD_ROUNDING_BOUND = 4e-3


def forward_version(cfg, arch: str) -> str:
    """The kernel layer a forward config configs_of lists runs on arch: the tooling's
    forced one (an experiment config names it), else compile_kernel.product_algorithm's."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import product_algorithm

    return getattr(cfg, "algorithm", None) or product_algorithm(cfg, arch)


def one_forward_kernel(case: Case, family: str, arch: str) -> bool:
    """Whether the plain and the training forward of the case's checkpointed path run one
    kernel layer on arch (then their O must be bitwise equal; else they may differ by the
    fp32 sum order)."""
    *_, plain, training = configs_of(case, family, checkpoints=True)
    return forward_version(plain, arch) == forward_version(training, arch)


def forward_decay(cfg, arch: str) -> str:
    """Where a forward config configs_of lists puts the gate decays on arch: the tooling's
    knob (an experiment config names it), else compile_kernel.product_decay's."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import product_decay

    return getattr(cfg, "decay", None) or product_decay(cfg, arch)


def values_scaled(case: Case, family: str, arch: str) -> bool:
    """Whether the case's forward writing U runs the scaled-decay chain (fwd_wgmma_scaled.py:
    q-hat and k-hat rounded to bf16, the decays applied to fp32 results), whose rounding
    points are not the states kernel's (the decays folded into bf16 operands)."""
    *_, values = configs_of(case, family, checkpoints=True, values=True)
    return forward_decay(values, arch) != "folded"


def values_on_wgmma(case: Case, family: str, arch: str) -> bool:
    """Whether the case's forward writing U (the v1.3 path) runs wgmma on arch, whose R and
    state update sum on wgmma while the backward's states kernel sums on mma.sync."""
    *_, values = configs_of(case, family, checkpoints=True, values=True)
    return forward_version(values, arch) == "wgmma"


def fwd_kernel(kernel: str | None = None):
    """The use_kernel block routing forwards (training ones too) to `kernel` (default
    FWD_KERNEL); a no-op for the product's."""
    from frost_fwd_experiments import use_kernel

    return use_kernel(FWD_KERNEL if kernel is None else kernel, training=True)


def run_fwd(x, l2norm: bool, o, checkpoints=None, values=None, kernel: str | None = None):
    """frost_fwd (no final state) into o; with `checkpoints` it writes them too, with
    `values` U as well; on forward layer `kernel` (default FWD_KERNEL)."""
    from cudnn.linear_attention.frost.kernels.fwd import frost_fwd

    with fwd_kernel(kernel):
        frost_fwd(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens, out=o,
                  initial_state=x.initial_state, final_state=None, scale=1.0 / math.sqrt(x.q.shape[2]),
                  use_l2norm=l2norm, gate_per_channel=x.g.dim() == 3, beta_per_channel=x.beta.dim() == 3,
                  stream=None, state_checkpoints=checkpoints, values=values)


def new_values(x):
    """A NaN-filled buffer for the forward's U (bf16 [T, HO, V])."""
    import torch

    T, HO, V = x.q.shape[0], max(x.q.shape[1], x.v.shape[1]), x.v.shape[2]
    return torch.full((T, HO, V), float("nan"), dtype=torch.bfloat16, device=x.q.device)


def workspace_u(x, ws):
    """The U region of a recompute-path workspace (what the states kernel wrote)."""
    import torch

    from cudnn.linear_attention.frost.kernels.bwd import workspace_layout

    T, N = x.q.shape[0], x.cu_seqlens.numel() - 1
    regions, _ = workspace_layout(total_tokens=T, num_seqs=N, heads_q=x.q.shape[1], heads_k=x.k.shape[1],
                                  heads_v=x.v.shape[1], head_dim_k=x.q.shape[2], head_dim_v=x.v.shape[2])
    r = next(r for r in regions if r.name == "u")
    count = math.prod(r.shape)
    return ws[r.offset:r.offset + 2 * count].view(torch.bfloat16).view(r.shape)


def new_checkpoints(x):
    """A NaN-filled state_checkpoints buffer for x (bf16 [T // 64 + N, HO, V, K])."""
    import torch

    from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_rows

    T, N = x.q.shape[0], x.cu_seqlens.numel() - 1
    HO, V, K = max(x.q.shape[1], x.v.shape[1]), x.v.shape[2], x.q.shape[2]
    return torch.full((checkpoint_rows(T, N), HO, V, K), float("nan"), dtype=torch.bfloat16, device=x.q.device)


# ---- precompile -----------------------------------------------------------------------------

def configs_of(case: Case, family: str, checkpoints: bool = False, plain_forward: bool = True,
               values: bool = False):
    """The backward kernels of a case; with `checkpoints`, those of the checkpointed path
    plus the forward with checkpoints and (plain_forward) without (as run_fwd calls it);
    with `values` too, those of the v1.3 path and the forward writing U."""
    import dataclasses as dc

    from cudnn.linear_attention.frost.kernels.bwd import check_bwd_operands, stage_configs
    from frost_bwd_experiments import use_bwd_variants

    _, x, dO, dht = make_case(case, family, "cpu")
    out = grads_buffers(x, "cpu")
    ckpt = new_checkpoints(x) if checkpoints else None
    with use_bwd_variants():  # the kernels run_bwd's calls build
        cfg, _, _ = check_bwd_operands(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens,
                                       dO=dO, initial_state=x.initial_state, d_final_state=dht,
                                       use_l2norm=case.l2norm, gate_per_channel=x.g.dim() == 3,
                                       beta_per_channel=x.beta.dim() == 3, state_checkpoints=ckpt,
                                       values=new_values(x) if values else None, **out)
        kernels = list(stage_configs(cfg))
    forwards = []
    if checkpoints:  # the forward both ways: check_case_checkpoints compares their outputs
        forwards += [cfg.fwd] * plain_forward + [dc.replace(cfg.fwd, write_checkpoints=True)]
    if values:
        forwards.append(dc.replace(cfg.fwd, write_checkpoints=True, write_values=True))
    return kernels + [routed(f) for f in forwards]


def forward_of(kernels) -> object:
    """The forward config of the call a backward kernel list (configs_of) serves: the .fwd
    of its first backward config (on the recompute path the states stage is the forward
    kernel itself, compiled without its output: bwd.recompute_configs, so not the first)."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig

    return next(k for k in kernels if isinstance(k, FrostBwdConfig)).fwd


def routed(fwd_cfg, kernel: str | None = None):
    """The forward config run_fwd launches for the product config fwd_cfg on `kernel`."""
    from frost_fwd_experiments import decay_requested, engine_config, rows_requested, stores_requested

    # FROST_FWD_DECAY, FROST_FWD_ROWS and FROST_FWD_STORES as fwd_kernel's use_kernel
    # block reads them (the scaled-decay GDN chain, the vector chain's cp.async row
    # copies, its staged stores)
    return engine_config(fwd_cfg, FWD_KERNEL if kernel is None else kernel, training=True, decay=decay_requested(),
                         rows=rows_requested(), stores=stores_requested())


def matrix_configs(families):
    """The kernels test_la_frost_bwd_engines.py launches (its shapes, flags, state dtypes)."""
    from tests.numerics import test_la_frost_bwd_engines as mx

    cases = [(shape, l2, h0) for shape, l2, h0 in mx.COMBOS]
    cases += [(shape, True, True) for shape in mx.LONG_SHAPES] + [(mx.SHAPES[1], False, False)]
    cases += [(("batch", [300, 129, 1000], 8, 8, 128, 128), True, True),
              (("alone", [129], 8, 8, 128, 128), True, True)]
    ckpt_cases = [(("batch", [300, 129, 1000], 8, 8, 128, 128), True, True)]
    ckpt_cases += list(mx.CKPT_COMBOS)
    out = []
    for fam in families:
        for with_ckpt, todo in ((False, cases), (True, ckpt_cases)):
            for (_, lens, H, HV, K, V), l2, h0 in todo:
                case = Case("matrix", tuple(lens[:3]) or (1,), H, HV, K, V, h0=h0, dht=True, l2norm=l2)
                out += configs_of(case, fam, checkpoints=with_ckpt, plain_forward=False)
        for (_, lens, H, HV, K, V), l2, h0 in mx.VALUES_COMBOS:  # the v1.3 path and what it is compared with
            case = Case("matrix", tuple(lens[:3]) or (1,), H, HV, K, V, h0=h0, dht=True, l2norm=l2)
            out += configs_of(case, fam) + configs_of(case, fam, checkpoints=True, plain_forward=False, values=True)
    return out


def _build(cfg_fields, arch, root, host_target):
    sys.path[:0] = [str(REPO / r) for r in ("engines_frost", "engines_common", "router", "ir", "ops",
                                             "engines_frost/tests", ".")]
    from cudnn.linear_attention.frost.kernels import kernel_store
    from cudnn.linear_attention.frost.kernels.bwd_compile import compile_bwd
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.compile_kernel import compile_fwd
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    t = time.time()
    if "stage" in cfg_fields:
        cfg = FrostBwdConfig(**{**cfg_fields, "fwd": FrostFwdConfig(**cfg_fields["fwd"])})
        kernel = compile_bwd(cfg, arch, host_target=host_target)
    else:
        if "algorithm" in cfg_fields:  # a forward forced by --fwd-kernel (the test tooling's config)
            from frost_fwd_experiments import FrostFwdExperiment as cls
        else:
            cls = FrostFwdConfig
        cfg = cls(**cfg_fields)
        kernel = compile_fwd(cfg, arch, host_target=host_target)
    kernel_store.KernelStore(Path(root)).save(cfg, arch, kernel)
    return kernel_store.describe(cfg), time.time() - t


def precompile(cfgs, arch: str, root: str, jobs: int, host_target: str | None = None) -> None:
    """Builds the configs the store lacks, `jobs` processes at a time; host_target (the
    kernel store's generic x86-64) builds on a machine without a GPU for another host."""
    from cudnn.linear_attention.frost.kernels import kernel_store
    from cudnn.linear_attention.frost.kernels.compile_kernel import preferred_ffi

    store = kernel_store.KernelStore(Path(root))
    ffi = preferred_ffi(host_target)
    host = kernel_store.host_id(host_target)
    todo = [c for c in dict.fromkeys(cfgs)
            if not store.sidecar(kernel_store.entry_key(c, arch, ffi, host=host)).is_file()]
    print(f"precompile: {len(todo)} of {len(set(cfgs))} backward kernels to build ({ffi}), {jobs} jobs", flush=True)
    if not todo:
        return
    t = time.time()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futs = [pool.submit(_build, dataclasses.asdict(c), arch, root, host_target) for c in todo]
        for f in concurrent.futures.as_completed(futs):
            name, secs = f.result()
            print(f"  built {name} in {secs:.1f} s", flush=True)
    print(f"precompile: done in {time.time() - t:.0f} s", flush=True)


# ---- checks and timing ----------------------------------------------------------------------

def check_case(case: Case, family: str) -> tuple[bool, str]:
    import torch

    from tests.reference.compare import rel_err
    from tests.reference.families import reference_backward

    cfg, x, dO, dht = make_case(case, family, "cuda")
    out = grads_buffers(x, "cuda")
    ws = run_bwd(x, dO, dht, case.l2norm, out)
    first = {k: v.clone() for k, v in out.items() if v is not None}
    ws.fill_(7)  # the second run must not depend on what the first left in the workspace
    run_bwd(x, dO, dht, case.l2norm, out, workspace=ws)
    torch.cuda.synchronize()
    same = all(torch.equal(first[k], out[k]) for k in first)
    ref = reference_backward(x, dO.double(), None if dht is None else dht.double())
    names = {"dq": "dq", "dk": "dk", "dv": "dv", "dg": "dg", "dbeta": "dbeta", "dw": "dw",
             "d_initial_state": "d_initial_state"}
    errs = {}
    for k, rk in names.items():
        if out.get(k) is None:
            continue
        errs[k] = rel_err(out[k].double(), getattr(ref, rk).double())
    bound = 1.5e-2 if case.correlated else 1e-2
    ok = same and all(e < bound and math.isfinite(e) for e in errs.values())
    detail = " ".join(f"{k}={v:.2e}" for k, v in errs.items())
    return ok, f"{'PASS' if ok else 'FAIL'} {family} {case.name}: {detail} deterministic={same}"


def check_case_checkpoints(case: Case, family: str) -> tuple[bool, str]:
    """The case on the checkpointed path (module docstring, step 2)."""
    import torch

    from cudnn.linear_attention.frost.kernels.fwd import device_arch
    from frost_bwd_model import forward_checkpoints_model
    from tests.reference.compare import rel_err
    from tests.reference.families import reference_backward

    cfg, x, dO, dht = make_case(case, family, "cuda")
    o_plain, o = torch.empty_like(dO), torch.empty_like(dO)
    run_fwd(x, case.l2norm, o_plain)
    ckpt = new_checkpoints(x)
    run_fwd(x, case.l2norm, o, checkpoints=ckpt)
    torch.cuda.synchronize()
    same_o = torch.equal(o, o_plain)
    if not one_forward_kernel(case, family, device_arch(x.q.device)):  # two layers: fp32 sum orders
        same_o = rel_err(o.double(), o_plain.double()) <= FWD_ROUNDING_BOUND
    cpu = x.to(device="cpu")
    model = forward_checkpoints_model(cpu.q, cpu.k, cpu.v, cpu.g, cpu.beta, cpu.w, cpu.cu_seqlens,
                                      use_l2norm=case.l2norm, initial_state=cpu.initial_state)
    got = ckpt.double().cpu()
    written = ~model.isnan()
    unwritten_nan = bool(got[~written].isnan().all())
    ckpt_err = rel_err(got[written], model[written]) if written.any() else 0.0
    out = grads_buffers(x, "cuda")
    ws = run_bwd(x, dO, dht, case.l2norm, out, checkpoints=ckpt)
    first = {k: v.clone() for k, v in out.items() if v is not None}
    ws.fill_(7)
    run_bwd(x, dO, dht, case.l2norm, out, workspace=ws, checkpoints=ckpt)
    recompute = grads_buffers(x, "cuda")
    run_bwd(x, dO, dht, case.l2norm, recompute)
    torch.cuda.synchronize()
    same = all(torch.equal(first[k], out[k]) for k in first)
    ref = reference_backward(x, dO.double(), None if dht is None else dht.double())
    errs, drift = {}, 0.0
    for k in ("dq", "dk", "dv", "dg", "dbeta", "dw", "d_initial_state"):
        if out.get(k) is None:
            continue
        errs[k] = rel_err(out[k].double(), getattr(ref, k).double())
        drift = max(drift, rel_err(out[k].double(), recompute[k].double()))
    bound = 1.5e-2 if case.correlated else 1e-2
    ok = (same and same_o and unwritten_nan and ckpt_err < bound
          and all(e < bound and math.isfinite(e) for e in errs.values()))
    detail = " ".join(f"{k}={v:.2e}" for k, v in errs.items())
    return ok, (f"{'PASS' if ok else 'FAIL'} {family} {case.name}[ckpt]: {detail} checkpoints={ckpt_err:.2e} "
                f"unwritten_nan={unwritten_nan} same_o={same_o} deterministic={same} vs_recompute={drift:.1e}")


def check_case_values(case: Case, family: str) -> tuple[bool, str]:
    """The case on the v1.3 path (module docstring, step 2): the forward writes U too."""
    import torch

    from cudnn.linear_attention.frost.kernels.fwd import device_arch
    from frost_bwd_model import forward_values_model
    from tests.reference.compare import rel_err

    cfg, x, dO, dht = make_case(case, family, "cuda")
    o_ckpt, o = torch.empty_like(dO), torch.empty_like(dO)
    ckpt_only, ckpt, u = new_checkpoints(x), new_checkpoints(x), new_values(x)
    run_fwd(x, case.l2norm, o_ckpt, checkpoints=ckpt_only)
    run_fwd(x, case.l2norm, o, checkpoints=ckpt, values=u)
    recompute = grads_buffers(x, "cuda")
    ws_states = run_bwd(x, dO, dht, case.l2norm, recompute)
    torch.cuda.synchronize()
    same_o = torch.equal(o, o_ckpt) and torch.equal(ckpt.isnan(), ckpt_only.isnan()) \
        and torch.equal(ckpt.nan_to_num(), ckpt_only.nan_to_num())
    cpu = x.to(device="cpu")
    model = forward_values_model(cpu.q, cpu.k, cpu.v, cpu.g, cpu.beta, cpu.w, cpu.cu_seqlens,
                                 use_l2norm=case.l2norm, initial_state=cpu.initial_state)
    got = u.double().cpu()
    covered = ~model.isnan()
    uncovered_nan = bool(got[~covered].isnan().all())
    u_err = rel_err(got[covered], model[covered]) if covered.any() else 0.0
    states_u = workspace_u(x, ws_states).double().cpu()
    u_vs_states = (got[covered] - states_u[covered]).abs().max().item() if covered.any() else 0.0
    out = grads_buffers(x, "cuda")
    ws = run_bwd(x, dO, dht, case.l2norm, out, checkpoints=ckpt, values=u)
    first = {k: v.clone() for k, v in out.items() if v is not None}
    ws.fill_(7)
    run_bwd(x, dO, dht, case.l2norm, out, workspace=ws, checkpoints=ckpt, values=u)
    torch.cuda.synchronize()
    same = all(torch.equal(first[k], out[k]) for k in first)
    drift = max(rel_err(out[k].double(), recompute[k].double()) for k in first)
    bound = 1.5e-2 if case.correlated else 1e-2
    bitwise = u_vs_states == 0.0 and drift == 0.0
    arch = device_arch(x.q.device)
    if values_on_wgmma(case, family, arch):  # wgmma sums vs the states kernel's mma.sync
        u_rel = rel_err(got[covered], states_u[covered]) if covered.any() else 0.0
        # the scaled chain's U and the states kernel's are two roundings of the same
        # products, each within FWD_ROUNDING_BOUND's reach of the exact one: twice that apart
        paths = 2 * FWD_ROUNDING_BOUND if values_scaled(case, family, arch) else FWD_ROUNDING_BOUND
        close = u_rel <= paths and drift <= paths
        extra = f" U_rel_vs_states={u_rel:.1e} bitwise={bitwise}"
    else:
        close, extra = bitwise, ""
    ok = same and same_o and uncovered_nan and u_err < bound and close
    return ok, (f"{'PASS' if ok else 'FAIL'} {family} {case.name}[ckpt+U]: U={u_err:.2e} U_vs_states={u_vs_states:.1e} "
                f"uncovered_nan={uncovered_nan} same_o_ckpt={same_o} deterministic={same} vs_recompute={drift:.1e}"
                + extra)


@contextlib.contextmanager
def env_set(var: str, value: str):
    """The environment variable var = value inside the block (run_bwd and configs_of read
    the FROST_BWD_* switches on every call, through frost_bwd_experiments), restored after."""
    old = os.environ.get(var)
    os.environ[var] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[var]
        else:
            os.environ[var] = old


def chain_variant(name: str, family: str = "gdn"):
    """The chain switch of `family` = name inside the block: FROST_BWD_CHAIN for scalar
    gates, FROST_BWD_CHAIN_VEC for vector gates (the tooling reads one per family)."""
    from frost_bwd_experiments import CHAIN_ENV, CHAIN_VEC_ENV

    return env_set(CHAIN_ENV if family == "gdn" else CHAIN_VEC_ENV, name)


# --chain / --chain-vec: the variant a compare run puts everything on (checked against
# CHAIN_BASELINE's chain)
CHAIN_COMPARE = {"both": "pipelined", "wgmma-both": "wgmma", "wgmma_async-both": "wgmma_async"}
# what each compared variant is checked and timed against, and whether bitwise: the
# pipelined chain runs the serial one's sums in the same order, the asynchronous wgmma
# chain the wgmma chain's (only the retirement of a group moves); the wgmma chain sums in
# the tensor core's order (bitwise on the H200 too, but not required: CHAIN_ROUNDING_BOUND)
CHAIN_BASELINE = {"pipelined": "serial", "wgmma": "serial", "wgmma_async": "wgmma"}
CHAIN_BITWISE = ("pipelined", "wgmma_async")
# wgmma chain vs serial chain, per gradient: the same terms summed in another order in fp32,
# then through bf16 dS checkpoints and dR rows (a rounding flip there is 2^-8 of an element)
CHAIN_ROUNDING_BOUND = 4e-3


def grads_variant(name: str, family: str = "gdn"):
    """The grads switch of `family` = name inside the block: FROST_BWD_GRADS for scalar
    gates, FROST_BWD_GRADS_VEC for vector gates (the tooling reads one per family)."""
    from frost_bwd_experiments import GRADS_ENV, GRADS_VEC_ENV

    return env_set(GRADS_ENV if family == "gdn" else GRADS_VEC_ENV, name)


# --grads: the variant a compare run puts everything on (checked against the mma.sync kernel)
GRADS_COMPARE = {"wgmma-both": "wgmma"}
# wgmma grads vs mma.sync grads, per gradient: the state products' k16 steps summed in
# another order in fp32, then dq, dk rounded to the io dtype (a flip there is 2^-8 of an
# element); dg through the row sums of the same products
GRADS_ROUNDING_BOUND = 4e-3


def check_case_grads(case: Case, family: str, variant: str = "wgmma") -> tuple[bool, str]:
    """The case on the recompute path with the mma.sync grads kernel and `variant`: each
    gradient within GRADS_ROUNDING_BOUND of the mma.sync kernel's; dv (beta dR) and
    d_initial_state (the chain's) bitwise."""
    import torch

    from tests.reference.compare import rel_err

    cfg, x, dO, dht = make_case(case, family, "cuda")
    got = {}
    for name in ("mma", variant):
        with grads_variant(name, family):
            got[name] = grads_buffers(x, "cuda")
            run_bwd(x, dO, dht, case.l2norm, got[name])
    torch.cuda.synchronize()
    a, b = got["mma"], got[variant]
    keys = [k for k in a if a[k] is not None]
    rels = {}
    for k in keys:
        r = rel_err(b[k].double(), a[k].double()) if a[k].numel() else 0.0
        rels[k] = r if math.isfinite(r) else float("inf")
    exact = [k for k in ("dv", "d_initial_state") if k in keys]
    bitwise = all(torch.equal(a[k], b[k]) for k in exact)
    same = all(torch.equal(a[k], b[k]) for k in keys)
    ok = bitwise and all(r <= GRADS_ROUNDING_BOUND for r in rels.values())
    detail = " ".join(f"{k}={v:.1e}" for k, v in rels.items())
    return ok, (f"{'PASS' if ok else 'FAIL'} {family} {case.name}[grads {variant}]: rel_diff {detail} "
                f"bitwise_dv={bitwise} bitwise={same}")


def check_case_chains(case: Case, family: str, variant: str = "pipelined") -> tuple[bool, str]:
    """The case on the recompute path with CHAIN_BASELINE[variant] and `variant`. The
    pipelined one runs the serial one's instructions per chunk (another order of stages,
    the same order of every sum), the asynchronous wgmma one the wgmma one's, so every
    gradient must be bitwise equal (CHAIN_BITWISE); the wgmma one sums in another order,
    so each gradient must be within CHAIN_ROUNDING_BOUND of the serial's."""
    import torch

    from tests.reference.compare import rel_err

    cfg, x, dO, dht = make_case(case, family, "cuda")
    base = CHAIN_BASELINE[variant]
    got = {}
    for name in (base, variant):
        with chain_variant(name, family):
            got[name] = grads_buffers(x, "cuda")
            run_bwd(x, dO, dht, case.l2norm, got[name])
    torch.cuda.synchronize()
    a, b = got[base], got[variant]
    keys = [k for k in a if a[k] is not None]
    same = all(torch.equal(a[k], b[k]) for k in keys)
    diff = max(((a[k].double() - b[k].double()).abs().nan_to_num(float("inf")).max().item() for k in keys),
               default=0.0)
    rel = max((rel_err(b[k].double(), a[k].double()) for k in keys if a[k].numel()), default=0.0)
    rel = rel if math.isfinite(rel) else float("inf")
    ok = same if variant in CHAIN_BITWISE else rel <= CHAIN_ROUNDING_BOUND
    against = "" if base == "serial" else f"vs {base} "  # the lines of the serial-based variants as before
    return ok, (f"{'PASS' if ok else 'FAIL'} {family} {case.name}[chains {variant}]: {against}bitwise={same} "
                f"max_abs_diff={diff:.1e} rel_diff={rel:.1e}")


def time_family(family: str, reps: int = 20, checkpoints: bool = True, values: bool = True,
                chain_compare: str | None = None, grads_compare: bool = False) -> list[str]:
    import torch

    from cudnn.linear_attention.frost.kernels.fwd import frost_fwd
    from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
    from tests.reference.preprocess import Family

    cfg = InputConfig(family=Family(family), seq_lens=(4096,) * 8, H=16, K=128, V=128, dtype=torch.bfloat16,
                      device="cuda")
    x = make_inputs(cfg, 0)
    x = dataclasses.replace(x, k=torch.nn.functional.normalize(x.k.float(), dim=-1).to(x.k.dtype), g=x.g * 0.5)
    dO, _ = make_grad_outputs(cfg, 1)
    out = grads_buffers(x, "cuda")
    o = torch.empty_like(dO)

    def fwd():
        with fwd_kernel():
            frost_fwd(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens, out=o,
                      initial_state=None, final_state=None, scale=128 ** -0.5, use_l2norm=False,
                      gate_per_channel=x.g.dim() == 3, beta_per_channel=x.beta.dim() == 3, stream=None)

    ws = run_bwd(x, dO, None, False, out)

    def timed(fn):
        for _ in range(3):
            fn()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return sorted(times)[len(times) // 2]

    lines = [f"TIME {family} fwd {timed(fwd):.3f} ms"]
    for stage in ("states", "chain", "grads"):
        ms = timed(lambda s=stage: run_bwd(x, dO, None, False, out, ws, stages=(s,)))
        lines.append(f"TIME {family} bwd[{stage}] {ms:.3f} ms")
    if chain_compare:  # the compared variant's baseline chain (CHAIN_BASELINE)
        base = CHAIN_BASELINE[chain_compare]
        with chain_variant(base, family):
            ms = timed(lambda: run_bwd(x, dO, None, False, out, ws, stages=("chain",)))
        lines.append(f"TIME {family} bwd[chain, {base}] {ms:.3f} ms")
    if grads_compare:
        with grads_variant("mma", family):
            ms = timed(lambda: run_bwd(x, dO, None, False, out, ws, stages=("grads",)))
        lines.append(f"TIME {family} bwd[grads, mma] {ms:.3f} ms")
    lines.append(f"TIME {family} bwd {timed(lambda: run_bwd(x, dO, None, False, out, ws)):.3f} ms")
    lines.append(f"TIME {family} fwd+bwd {timed(lambda: (fwd(), run_bwd(x, dO, None, False, out, ws))):.3f} ms")
    if not checkpoints:
        return lines
    ckpt = new_checkpoints(x)

    def fwd_ckpt():
        run_fwd(x, False, o, checkpoints=ckpt)

    lines.append(f"TIME {family} fwd[ckpt] {timed(fwd_ckpt):.3f} ms")
    ws_c = run_bwd(x, dO, None, False, out, checkpoints=ckpt)
    ms = timed(lambda: run_bwd(x, dO, None, False, out, ws_c, stages=("values",), checkpoints=ckpt))
    lines.append(f"TIME {family} bwd[values] {ms:.3f} ms")
    ms = timed(lambda: run_bwd(x, dO, None, False, out, ws_c, checkpoints=ckpt))
    lines.append(f"TIME {family} bwd[ckpt] {ms:.3f} ms")
    ms = timed(lambda: (fwd_ckpt(), run_bwd(x, dO, None, False, out, ws_c, checkpoints=ckpt)))
    lines.append(f"TIME {family} fwd+bwd[ckpt] {ms:.3f} ms")
    if not values:
        return lines
    u = new_values(x)

    def fwd_u():
        run_fwd(x, False, o, checkpoints=ckpt, values=u)

    lines.append(f"TIME {family} fwd[ckpt+U] {timed(fwd_u):.3f} ms")
    ws_u = run_bwd(x, dO, None, False, out, checkpoints=ckpt, values=u)
    ms = timed(lambda: run_bwd(x, dO, None, False, out, ws_u, checkpoints=ckpt, values=u))
    lines.append(f"TIME {family} bwd[U] {ms:.3f} ms")
    ms = timed(lambda: (fwd_u(), run_bwd(x, dO, None, False, out, ws_u, checkpoints=ckpt, values=u)))
    lines.append(f"TIME {family} fwd+bwd[U] {ms:.3f} ms")
    if FWD_KERNEL != "product":  # the product's training forward in the same process: the A/B

        def fwd_u_product():
            run_fwd(x, False, o, checkpoints=ckpt, values=u, kernel="product")

        lines.append(f"TIME {family} fwd[ckpt+U, product] {timed(fwd_u_product):.3f} ms")
        ms = timed(lambda: (fwd_u_product(), run_bwd(x, dO, None, False, out, ws_u, checkpoints=ckpt, values=u)))
        lines.append(f"TIME {family} fwd+bwd[U, product] {ms:.3f} ms")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append", choices=FAMILIES)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--only", help="run only the case with this name")
    ap.add_argument("--no-checkpoints", action="store_true",
                    help="skip the checkpointed path (forward writes state_checkpoints, backward reads them)")
    ap.add_argument("--no-values", action="store_true",
                    help="skip the v1.3 path (forward writes U too, backward runs chain + grads only)")
    ap.add_argument("--matrix", action="store_true",
                    help="also build the kernels of tests/numerics/test_la_frost_bwd_engines.py")
    ap.add_argument("--prebuild", action="store_true",
                    help="only build the kernels into the store, for sm_90a and a generic x86-64 host "
                         "(a machine without a GPU; the DSL's own calling convention)")
    ap.add_argument("--chain", choices=("serial", "pipelined", "wgmma", "wgmma_async", "both", "wgmma-both",
                                        "wgmma_async-both"),
                    help="the chain kernel (FROST_BWD_CHAIN; module docstring, step 4)")
    ap.add_argument("--chain-vec", choices=("serial", "wgmma", "wgmma_async", "wgmma-both", "wgmma_async-both"),
                    help="the KDA / GDN-2 chain kernel (FROST_BWD_CHAIN_VEC; module docstring, step 4)")
    ap.add_argument("--grads", choices=("mma", "wgmma", "wgmma-both"),
                    help="the grads kernel (FROST_BWD_GRADS; module docstring, step 5)")
    ap.add_argument("--grads-vec", choices=("mma", "wgmma", "wgmma-both"),
                    help="the KDA / GDN-2 grads kernel (FROST_BWD_GRADS_VEC; module docstring, step 5)")
    ap.add_argument("--fwd-kernel", choices=("product", "pipelined", "wgmma"), default="product",
                    help="the forward layer of every forward call, training ones included (module "
                         "docstring, step 6)")
    args = ap.parse_args()
    global FWD_KERNEL
    FWD_KERNEL = args.fwd_kernel
    families = args.family or list(FAMILIES)
    compare = CHAIN_COMPARE.get(args.chain)  # the variant checked against the serial chain, or None
    if args.chain:
        from frost_bwd_experiments import CHAIN_ENV

        os.environ[CHAIN_ENV] = compare or args.chain
    vcompare = CHAIN_COMPARE.get(args.chain_vec)  # the same for the vector-gate chain
    if args.chain_vec:
        from frost_bwd_experiments import CHAIN_VEC_ENV

        os.environ[CHAIN_VEC_ENV] = vcompare or args.chain_vec
    chain_compare = {fam: compare if fam == "gdn" else vcompare for fam in FAMILIES}
    gcompare = GRADS_COMPARE.get(args.grads)  # the grads variant checked against mma.sync, or None
    if args.grads:
        from frost_bwd_experiments import GRADS_ENV

        os.environ[GRADS_ENV] = gcompare or args.grads
    gvcompare = GRADS_COMPARE.get(args.grads_vec)  # the same for the vector-gate grads
    if args.grads_vec:
        from frost_bwd_experiments import GRADS_VEC_ENV

        os.environ[GRADS_VEC_ENV] = gvcompare or args.grads_vec
    grads_compare = {fam: gcompare if fam == "gdn" else gvcompare for fam in FAMILIES}
    root = os.environ.setdefault("FROST_KERNEL_CACHE", str(REPO / ".frostcache"))
    ckpt = not args.no_checkpoints
    with_u = ckpt and not args.no_values
    cfgs = [c for fam in families for case in cases_for(fam, args.only)
            for c in configs_of(case, fam) + (configs_of(case, fam, checkpoints=True) if ckpt else [])
            + (configs_of(case, fam, checkpoints=True, values=True) if with_u else [])]
    if not args.no_time:
        timing = Case("bench", (4096,) * 8, 16, 16, 128, 128)
        for fam in families:
            bench = configs_of(timing, fam)
            cfgs += bench + [routed(forward_of(bench))]  # the timed forward: frost_fwd without states
            cfgs += configs_of(timing, fam, checkpoints=True) if ckpt else []
            cfgs += configs_of(timing, fam, checkpoints=True, values=True) if with_u else []
            if with_u and FWD_KERNEL != "product":  # the product's training forward (the A/B lines)
                fwd_u = dataclasses.replace(forward_of(bench), write_checkpoints=True, write_values=True)
                cfgs.append(routed(fwd_u, "product"))
    if args.matrix:
        cfgs += matrix_configs(families)
    for fam in families:  # the baseline chain of every compared case and of the timing shape
        if chain_compare[fam]:
            with chain_variant(CHAIN_BASELINE[chain_compare[fam]], fam):
                cases = list(cases_for(fam, args.only))
                cases += [Case("bench", (4096,) * 8, 16, 16, 128, 128)] if not args.no_time else []
                cfgs += [c for case in cases for c in configs_of(case, fam)]
    for fam in families:  # the mma.sync grads kernel of every compared case and of the timing shape
        if grads_compare[fam]:
            with grads_variant("mma", fam):
                cases = list(cases_for(fam, args.only))
                cases += [Case("bench", (4096,) * 8, 16, 16, 128, 128)] if not args.no_time else []
                cfgs += [c for case in cases for c in configs_of(case, fam)]
    if args.prebuild:
        from cudnn.linear_attention.frost.kernels.kernel_store import GENERIC_X86_64

        precompile(cfgs, "sm_90a", root, args.jobs, host_target=GENERIC_X86_64)
        return 0
    import torch

    from cudnn.linear_attention.frost.kernels.fwd import device_arch

    precompile(cfgs, device_arch(torch.device("cuda")), root, args.jobs)
    failures = runs = 0
    for fam in families:
        for case in cases_for(fam, args.only):
            runs += 1
            try:
                ok, line = check_case(case, fam)
            except Exception as e:  # report and go on: one broken case must not hide the others
                ok, line = False, f"FAIL {fam} {case.name}: {type(e).__name__}: {str(e)[:300]}"
            failures += not ok
            print(line, flush=True)
            if ckpt:
                runs += 1
                try:
                    ok, line = check_case_checkpoints(case, fam)
                except Exception as e:
                    ok, line = False, f"FAIL {fam} {case.name}[ckpt]: {type(e).__name__}: {str(e)[:300]}"
                failures += not ok
                print(line, flush=True)
            if with_u:
                runs += 1
                try:
                    ok, line = check_case_values(case, fam)
                except Exception as e:
                    ok, line = False, f"FAIL {fam} {case.name}[ckpt+U]: {type(e).__name__}: {str(e)[:300]}"
                failures += not ok
                print(line, flush=True)
            if chain_compare[fam]:
                runs += 1
                try:
                    ok, line = check_case_chains(case, fam, chain_compare[fam])
                except Exception as e:
                    ok, line = False, f"FAIL {fam} {case.name}[chains]: {type(e).__name__}: {str(e)[:300]}"
                failures += not ok
                print(line, flush=True)
            if grads_compare[fam]:
                runs += 1
                try:
                    ok, line = check_case_grads(case, fam, grads_compare[fam])
                except Exception as e:
                    ok, line = False, f"FAIL {fam} {case.name}[grads]: {type(e).__name__}: {str(e)[:300]}"
                failures += not ok
                print(line, flush=True)
        if not args.no_time:
            for line in time_family(fam, checkpoints=ckpt, values=with_u,
                                    chain_compare=chain_compare[fam],
                                    grads_compare=bool(grads_compare[fam])):
                print(line, flush=True)
    print(f"SUMMARY {runs - failures} passed, {failures} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
