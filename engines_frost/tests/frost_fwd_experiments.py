"""The FROST forward kernels only the tests and benchmarks build, and the experiment switches
that pick them: the one home of what the product (kernels/) no longer carries.

The product compiles one kernel family from a FrostFwdConfig whose fields are all product
fields: the wgmma layer on sm_90a (plain and training), the pipelined layer elsewhere
(compile_kernel.product_algorithm). A FrostFwdExperiment is a FrostFwdConfig plus the
tooling's choices:
  algorithm    "oracle" (the SIMT oracle, frost_fwd_oracle.py, test-only), "mma" (the base
               layer, fwd_mma.py, on its own), "pipelined" (fwd_pipelined.py; forced, also
               where the product picks wgmma) or "wgmma" (fwd_wgmma.py: the pipelined layer
               with the chain's products on warpgroup MMA, sm_90a only); PRODUCT ("product") in
               the functions below means what the product picks for the config on
               TOOLING_ARCH. Training configs (write_checkpoints, write_values) take the
               layers with training launchers (TRAINING_ALGORITHMS): wgmma (the product's
               pick on sm_90a) or pipelined (forced there: the training forward the product
               ran before, for A/B runs);
  skip_stages  per-chunk stages compiled out of the loop (STAGES: bench/frost_stage_times.py,
               whose results are wrong by construction) or "bounds", the cu_seqlens safety
               of seq_bounds.py (bench/cu_seqlens_cost.py);
  ldmatrix     False: shared-memory MMA operands by element-wise loads (a diagnostic);
  gram         "wgmma": the wgmma layer's scalar-gate Gram stage on warpgroup MMA
               (kernels/fwd_wgmma_gram.py; wgmma layer, GDN, bf16 only; m64n32 blocks),
               "wgmma16" / "wgmma64" the same with m64n16 / m64n64 blocks (GRAM_WIDTHS);
               "mma" (default): the pipelined layer's mma.sync Gram.
               The environment variable FROST_FWD_GRAM (GRAM_ENV) sets it for use_kernel's
               blocks;
  decay        "scaled": the wgmma layer's scalar-gate chain with the decays as per-token
               factors on its fp32 results and no operand stage (kernels/fwd_wgmma_scaled.py;
               wgmma layer, GDN, bf16 only; plain, training and output-free builds: the product's, so the default
               there, default_decay); "folded": the decays folded into the pipelined layer's bf16 operands
               (the default elsewhere and beside a wgmma Gram); "scaled-lead": "scaled" with the next
               chunk's rows copied a chunk ahead (fwd_wgmma_scaled.ScaledDecayLeadChain);
               "scaled-ws": the scaled chain warp-specialised, a producer role running the
               next chunk's rows and Gram (kernels/fwd_ws.py; K = V = 128, ws_applies:
               elsewhere "scaled"); "wy-ws": "scaled-ws" with the chunk's inverse and W'
               formed by the producer, the chain without its block solve
               (kernels/fwd_ws_wy.py; the same configs); "wyc-ws": the same without W',
               the chain applying the inverse to its R (fwd_ws_wy.FullInverseInChain);
               "wy-ws4": wy-ws's chain with its producer split into a math warpgroup
               (rows, the wgmma Gram at m64n64, the solves) and a copy warpgroup
               (kernels/fwd_ws4.py; gram forced to "wgmma64", M alone without an output); "wy-ws4raw":
               the same without the rows stage, the chain and the Gram on the caller's
               raw q / k rows with the norms as factors, a 3-stage ring of raw rows
               (fwd_ws4.RawRing); "wyc-ws4raw": that without W', the chain applying
               the inverse to its R (fwd_ws4.RawRingInChain: the product's for long
               GDN sequences); "wyc-ws4nl": that with the copies loading only the first
               chunks, a timing bound (frost_fwd_no_loads.NoLoads); "wyc-ws4va": the product's
               with v copied into the raw ring with its chunk's rows (frost_fwd_v_ahead.VAhead);
               "wyc-ws4tma": the product's with q and k by tensor-memory copies
               (frost_fwd_tma_rows.TmaRows); "wyc-ws4tmava": that with v in the ring by
               bulk copies (frost_fwd_tma_rows.TmaVAhead).
               The warp-specialised decays take a wgmma gram in their producer (output
               builds; elsewhere the gram falls back to "mma", except for the four-role
               decays, which keep theirs and build M alone).
               FROST_FWD_DECAY (DECAY_ENV) sets it
               for use_kernel's blocks;
  ws_regs      with a warp-specialised decay: the roles' setmaxnreg split (consumer, producer;
               wy-ws4: chain, math, copies), ()
               for the kernel's own (fwd_ws.WarpSpecialisedChain.split_mma_gram /
               split_wgmma_gram);
               FROST_FWD_WS_REGS="184,72" (or "192,104,24"; WS_REGS_ENV) sets it for use_kernel's blocks;
  rows         "async": the vector-gate wgmma chain's next-chunk rows by the pipelined
               layer's 16-byte cp.async (rows_async_applies: wgmma, per-channel gates, the folded chain) instead of
               the product's 1D bulk copies on an mbarrier (fwd_wgmma.FrostFwdWgmma.rows_by_bulk);
               "bulk" (default): each kernel's own. FROST_FWD_ROWS (ROWS_ENV) sets it for
               use_kernel's blocks;
  stores       "elements": the vector-gate wgmma chain's O and U rows by one 2-byte store per
               value (staged_stores_apply: K >= V and bf16 io too) instead of the product's per-warp
               buffers in KE's tile flushed as 16-byte stores (fwd_wgmma.FrostFwdWgmma.STAGED_STORES);
               "staged" (default): each kernel's own. FROST_FWD_STORES (STORES_ENV) sets it
               for use_kernel's blocks;
  sources      the hash of this file and frost_fwd_oracle.py: the kernel store keys the product's
               kernel sources itself, this field keys the tooling's.
compile_kernel.kernel_class asks such a config for its class (kernel_class() below: the
kernel class with the knobs as class attributes, which fwd_mma.FrostFwdMma reads at trace
time). Its fields key the kernel store and fwd's compile cache, so an experiment kernel
never stands in for a product one. Nothing in the product builds one: `tooling_config`
turns a product config (fwd.check_operands') into the config a tooling run of a kernel
layer launches, and `use_kernel` routes frost_fwd, hence the FROST engines, through a
layer (pytest --frost-fwd-kernel, tests/conftest.py; la_frost_smoke.py). Training
forwards stay on the product's kernel (wgmma on TOOLING_ARCH) unless the caller asks
for them too (`use_kernel(algorithm, training=True)`: la_frost_bwd_smoke.py --fwd-kernel,
bench_linear_attention.py --frost-fwd-kernel; e.g. "pipelined" for the A/B against the product).
Plain Python at import: no torch, no cutlass.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
from pathlib import Path

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, parse_register_split, register_split_ok

ALGORITHMS = ("oracle", "mma", "pipelined", "wgmma")
#: the layers that write state checkpoints and U (a training forward's config may name them)
TRAINING_ALGORITHMS = ("pipelined", "wgmma")
PRODUCT = "product"  # the layer compile_kernel.product_algorithm picks for each config
TOOLING_ARCH = "sm_90a"  # the arch the tooling's runs target (the H200)
#: per-chunk stages of mma / pipelined / wgmma that a timing experiment may compile out
STAGES = ("rows", "operands", "gram", "chain")
#: what else it may leave out: "bounds", the cu_seqlens safety (sequence bounds read
#: unclamped, no zeroing of rows no sequence covers), to time what that safety costs
SKIPPABLE = STAGES + ("bounds",)
#: the four-role forward's math warpgroup (fwd_ws4.FourRoles.math) also leaves out "inverse":
#: M, its diagonal inverses and A's solve, P kept (what a chain reading A from memory would
#: run); its "gram" is both Gram products and the solves, its "chain" the chain's products
FOUR_ROLE_SKIPPABLE = ("gram", "inverse", "chain")
_SOURCES = ("frost_fwd_experiments.py", "frost_fwd_oracle.py", "frost_fwd_no_loads.py", "frost_fwd_v_ahead.py",
            "frost_fwd_tma_rows.py")
#: the wgmma Gram's accumulator width per knob value (fwd_wgmma_gram.GramWgmma.gram_n)
GRAM_WIDTHS = {"wgmma": 32, "wgmma16": 16, "wgmma64": 64}
GRAMS = ("mma", *GRAM_WIDTHS)
#: FROST_FWD_GRAM=wgmma (or wgmma16, wgmma64): every forward a use_kernel block routes (la_frost_smoke.py, the
#: bench's --frost-fwd-kernel, and the bench when the variable is set) builds its Gram on
#: wgmma where that kernel exists (wgmma, scalar gates, bf16); unset or "mma": the pipelined layer's Gram
GRAM_ENV = "FROST_FWD_GRAM"
#: where the scalar-gate chain's decays go (fwd_wgmma_scaled.py): folded into the operands or
#: scaled onto the chain's fp32 results
DECAYS = ("folded", "scaled", "scaled-lead", "scaled-ws", "wy-ws", "wyc-ws", "wy-ws4", "wy-ws4raw", "wyc-ws4raw",
          "wyc-ws4nl", "wyc-ws4va", "wyc-ws4tma", "wyc-ws4tmava")
#: the warp-specialised decays (ws_applies; the setmaxnreg split knob ws_regs)
WS_DECAYS = ("scaled-ws", "wy-ws", "wyc-ws", "wy-ws4", "wy-ws4raw", "wyc-ws4raw", "wyc-ws4nl", "wyc-ws4va",
             "wyc-ws4tma", "wyc-ws4tmava")
#: the four-role decays (kernels/fwd_ws4.py): their Gram is the wgmma one at m64n64, and
#: their register split a (chain, math, copies) triple
FOUR_ROLES = ("wy-ws4", "wy-ws4raw", "wyc-ws4raw", "wyc-ws4nl", "wyc-ws4va", "wyc-ws4tma", "wyc-ws4tmava")
FOUR_ROLE_GRAM = "wgmma64"
#: FROST_FWD_DECAY=folded (or scaled-lead, scaled-ws): every forward a use_kernel block routes runs that
#: chain where wgmma runs for scalar gates and bf16 (elsewhere the chain is folded anyway); unset: default_decay
DECAY_ENV = "FROST_FWD_DECAY"
#: FROST_FWD_WS_REGS="consumer,producer": the warp-specialised forward's setmaxnreg split
WS_REGS_ENV = "FROST_FWD_WS_REGS"
#: how the vector-gate wgmma chain copies the next chunk's rows (fwd_wgmma.FrostFwdWgmma.ROWS_BY_BULK)
ROWS = ("bulk", "async")
#: FROST_FWD_ROWS=async: every forward a use_kernel block routes copies them by cp.async
#: where rows_async_applies; unset or "bulk": the product's bulk copies
ROWS_ENV = "FROST_FWD_ROWS"
#: how the vector-gate wgmma chain stores O and U (fwd_wgmma.FrostFwdWgmma.STAGED_STORES)
STORES = ("staged", "elements")
#: FROST_FWD_STORES=elements: every forward a use_kernel block routes stores them by 2-byte
#: stores where staged_stores_apply; unset or "staged": the product's staged rows
STORES_ENV = "FROST_FWD_STORES"


@functools.cache
def sources_hash() -> str:
    """sha256 (16 hex digits) over the names and bytes of the tooling's kernel sources."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in _SOURCES:
        data = (here / name).read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class FrostFwdExperiment(FrostFwdConfig):
    """A forward config of the test and bench tooling: the product fields plus the kernel
    layer and the experiment knobs (module docstring)."""

    algorithm: str = "pipelined"
    skip_stages: tuple[str, ...] = ()
    ldmatrix: bool = True
    gram: str = "mma"
    decay: str = "folded"
    ws_regs: tuple[int, ...] = ()
    rows: str = "bulk"
    stores: str = "staged"
    sources: str = dataclasses.field(default_factory=sources_hash)

    def __post_init__(self):
        # a tuple however it arrives (JSON sidecars and command lines give lists): hashable
        object.__setattr__(self, "skip_stages", tuple(self.skip_stages))
        object.__setattr__(self, "ws_regs", tuple(self.ws_regs))
        super().__post_init__()

        def bad(name, expected):
            raise ValueError(f"FrostFwdExperiment: {name} must be {expected}, got {getattr(self, name)!r}")

        if self.algorithm not in ALGORITHMS:
            bad("algorithm", f"one of {ALGORITHMS}")
        skippable = FOUR_ROLE_SKIPPABLE if self.decay in FOUR_ROLES else SKIPPABLE
        if any(st not in skippable for st in self.skip_stages) or (self.skip_stages and self.algorithm == "oracle"):
            bad("skip_stages", f"a tuple of {SKIPPABLE} (not oracle), of {FOUR_ROLE_SKIPPABLE} with decay in "
                f"{FOUR_ROLES}")
        if not self.ldmatrix and self.algorithm == "oracle":
            bad("ldmatrix", "True for oracle (no MMA operands)")
        if self.gram not in GRAMS or (self.gram != "mma" and not gram_wgmma_applies(self, self.algorithm)):
            bad("gram", f"one of {GRAMS}, and 'mma' unless algorithm is wgmma with scalar gates and bf16 io")
        if self.decay not in DECAYS or (self.decay != "folded" and not scalar_gate_wgmma(self, self.algorithm)):
            bad("decay", f"one of {DECAYS}, and 'folded' unless algorithm is wgmma with scalar gates and bf16 io")
        if self.decay in WS_DECAYS and not ws_applies(self):
            bad("decay", f"one of {WS_DECAYS} only for K = V = 128 (ws_applies)")
        if self.ws_regs and (self.decay not in WS_DECAYS or not register_split_ok(self.ws_regs, split_lengths(self.decay))):
            bad("ws_regs", f"() or, with decay in {WS_DECAYS}, (consumer, producer) setmaxnreg counts (wy-ws4: "
                "(chain, math, copies)): multiples of 8 in [24, 256] that fit 65,536 registers")
        if self.decay in FOUR_ROLES and self.gram != FOUR_ROLE_GRAM:
            bad("gram", f"{FOUR_ROLE_GRAM!r} with decay in {FOUR_ROLES} (the math warpgroup's Gram)")
        if self.decay in ("scaled", "scaled-lead") and self.gram != "mma":
            bad("decay", "'folded' or 'scaled-ws' with a wgmma gram (the others re-plan q and k their own way)")
        if self.rows not in ROWS or (self.rows != "bulk" and not rows_async_applies(self, self.algorithm, self.decay)):
            bad("rows", f"one of {ROWS}, and 'bulk' unless algorithm is wgmma with per-channel gates (the folded chain)")
        if self.stores not in STORES or (self.stores != "staged"
                                         and not staged_stores_apply(self, self.algorithm, self.decay)):
            bad("stores", f"one of {STORES}, and 'staged' unless algorithm is wgmma with per-channel gates (the "
                "folded chain) and K >= V")
        if (self.write_checkpoints or self.write_values) and self.algorithm not in TRAINING_ALGORITHMS:
            bad("write_checkpoints", f"False unless algorithm is one of {TRAINING_ALGORITHMS} (the kernels "
                "that write them)")
        if not self.write_output and (self.algorithm in ("oracle", "mma")
                                      or (self.gram != "mma" and self.decay not in FOUR_ROLES)):
            # the oracle would read the null q; the mma layer's own stages and the two-warpgroup wgmma Gram keep
            # the q side (the four-role kernels drop P and the q rows without an output)
            bad("write_output", "True unless algorithm is pipelined or wgmma with the mma Gram, or a four-role decay "
                "(the kernels that compile the output out)")

    @property
    def kernel_label(self) -> str:
        """The kernel and its knobs in kernel_store.describe's lines."""
        return (self.algorithm + ("" if self.ldmatrix else " no-ldmatrix") + ("" if self.gram == "mma" else f" gram-{self.gram}")
                + ("" if self.decay == "folded" else f" decay-{self.decay}")
                + (" regs=" + "/".join(map(str, self.ws_regs)) if self.ws_regs else "")
                + ("" if self.rows == "bulk" else f" rows-{self.rows}")
                + ("" if self.stores == "staged" else f" stores-{self.stores}")
                + (" skip=" + "+".join(self.skip_stages) if self.skip_stages else ""))

    def kernel_class(self):
        """The CuTe DSL class compile_kernel.compile_fwd compiles for this config."""
        if self.algorithm == "oracle":
            from frost_fwd_oracle import FrostFwdOracle
            return FrostFwdOracle
        if self.algorithm == "mma":
            from cudnn.linear_attention.frost.kernels.fwd_mma import FrostFwdMma as base
        else:
            from cudnn.linear_attention.frost.kernels.compile_kernel import version_class
            base = version_class(self.algorithm, self)
        return with_knobs(base, self.skip_stages, self.ldmatrix, self.gram, self.decay, self.ws_regs, self.rows,
                          self.stores)


def scalar_gate_wgmma(cfg: FrostFwdConfig, algorithm: str) -> bool:
    """Whether cfg's kernel layer `algorithm` (a resolved one) is wgmma for scalar gates and
    bf16 io: where the wgmma Gram and the scaled-decay chain exist."""
    return algorithm == "wgmma" and not cfg.gate_per_channel and cfg.io_dtype == "bfloat16"


gram_wgmma_applies = scalar_gate_wgmma


def rows_async_applies(cfg: FrostFwdConfig, algorithm: str, decay: str = "folded") -> bool:
    """Whether cfg's kernel layer `algorithm` (a resolved one) copies its next chunk's rows
    by bulk copies, so that rows="async" changes it (fwd_wgmma.FrostFwdWgmma.rows_by_bulk): wgmma
    with per-channel gates, whose chain is the folded one."""
    return algorithm == "wgmma" and cfg.gate_per_channel and decay == "folded"


def ws_applies(cfg: FrostFwdConfig) -> bool:
    """Whether the warp-specialised scaled chain (fwd_ws.py) is built for cfg: K = V = 128
    (two consumer warpgroups; with scalar_gate_wgmma)."""
    return (cfg.K, cfg.V) == (128, 128)


def split_lengths(decay: str | None) -> tuple[int, ...]:
    """The register split forms a decay takes: a (chain, math, copies) triple for the four
    roles, a (consumer, producer) pair for the others."""
    return (3,) if decay in FOUR_ROLES else (2,)


def ws_regs_requested(decay: str | None = None) -> tuple[int, ...]:
    """WS_REGS_ENV's value as (consumer, producer) (decay wy-ws4: (chain, math, copies)),
    () when unset; ValueError otherwise."""
    import os

    return parse_register_split(os.environ.get(WS_REGS_ENV, ""), WS_REGS_ENV, split_lengths(decay))


def decay_requested() -> str | None:
    """DECAY_ENV's value (None when unset: default_decay, the product's); ValueError for
    anything but DECAYS."""
    import os

    decay = os.environ.get(DECAY_ENV, "").strip() or None
    if decay is not None and decay not in DECAYS:
        raise ValueError(f"{DECAY_ENV} must be one of {DECAYS}, got {decay!r}")
    return decay


def staged_stores_apply(cfg: FrostFwdConfig, algorithm: str, decay: str = "folded") -> bool:
    """Whether stores="elements" changes cfg's kernel layer `algorithm`: the vector-gate
    wgmma kernel (rows_async_applies) with K >= V (the buffers fit KE's tile) and bf16 io
    (fwd_wgmma.FrostFwdWgmma.staged_stores)."""
    return rows_async_applies(cfg, algorithm, decay) and cfg.K >= cfg.V and cfg.io_dtype == "bfloat16"


def choice_requested(env: str, choices: tuple[str, ...]) -> str:
    """A knob's environment variable `env`: its value, choices[0] (the default) when unset
    or empty; ValueError naming the variable for anything but `choices`."""
    import os

    value = os.environ.get(env, "").strip() or choices[0]
    if value not in choices:
        raise ValueError(f"{env} must be one of {choices}, got {value!r}")
    return value


def rows_requested() -> str:
    """ROWS_ENV's value ("bulk" when unset)."""
    return choice_requested(ROWS_ENV, ROWS)


def stores_requested() -> str:
    """STORES_ENV's value ("staged" when unset)."""
    return choice_requested(STORES_ENV, STORES)


def gram_requested() -> str:
    """GRAM_ENV's value ("mma" when unset)."""
    return choice_requested(GRAM_ENV, GRAMS)


@functools.cache
def with_knobs(base, skip_stages: tuple[str, ...], ldmatrix: bool, gram: str = "mma", decay: str = "folded",
               ws_regs: tuple[int, ...] = (), rows: str = "bulk", stores: str = "staged"):
    """`base` (FrostFwdMma or a subclass) itself at the product's knobs, else a subclass that
    sets them (one class per combination; a wgmma gram puts fwd_wgmma_gram.GramWgmma first,
    with its width; the scaled decays the product's own class, fwd_wgmma_scaled.scaled_decay_class,
    as the base, the lead and warp-specialised chains their mixins first; async rows
    clear the class's ROWS_BY_BULK, element stores its STAGED_STORES)."""
    if decay == "scaled":
        from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import scaled_decay_class
        base, decay = scaled_decay_class(base), "folded"  # the product's GDN class: the same kernel
    if (skip_stages == base.skip_stages and ldmatrix == base.ldmatrix and gram == "mma" and decay == "folded"
            and rows == "bulk" and stores == "staged"):
        return base
    tag = ("" if ldmatrix else "NoLdmatrix") + "".join(f"Skip{st.title()}" for st in skip_stages)
    bases, attrs = (base,), {"skip_stages": skip_stages, "ldmatrix": ldmatrix}
    if gram != "mma":
        from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma
        bases, tag = (GramWgmma, base), tag + f"GramWgmma{GRAM_WIDTHS[gram]}"
        attrs["gram_n"] = GRAM_WIDTHS[gram]
    if decay != "folded":
        from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import ScaledDecayLeadChain
        from cudnn.linear_attention.frost.kernels.fwd_ws import WarpSpecialisedChain
        from cudnn.linear_attention.frost.kernels.fwd_ws4 import FourRoles, RawRing, RawRingInChain
        from cudnn.linear_attention.frost.kernels.fwd_ws_wy import FullInverseChain, FullInverseInChain
        from frost_fwd_no_loads import NoLoads
        from frost_fwd_tma_rows import TmaRows, TmaVAhead
        from frost_fwd_v_ahead import VAhead
        mixin, name = {"scaled-lead": (ScaledDecayLeadChain, "ScaledDecayLead"),
                       "wy-ws4": (FourRoles, "FourRoles"), "wy-ws4raw": (RawRing, "RawRing"),
                       "wyc-ws4raw": (RawRingInChain, "RawRingInChain"),
                       "wyc-ws4nl": (NoLoads, "NoLoads"), "wyc-ws4va": (VAhead, "VAhead"),
                       "wyc-ws4tma": (TmaRows, "TmaRows"), "wyc-ws4tmava": (TmaVAhead, "TmaVAhead"),
                       "scaled-ws": (WarpSpecialisedChain, "WarpSpecialised"),
                       "wy-ws": (FullInverseChain, "FullInverse"),
                       "wyc-ws": (FullInverseInChain, "FullInverseInChain")}[decay]
        bases, tag = (mixin, *bases), tag + name
    if ws_regs:
        attrs["register_split"], tag = ws_regs, tag + "Regs" + "x".join(map(str, ws_regs))
    if rows == "async":
        attrs["ROWS_BY_BULK"], tag = False, tag + "AsyncRows"
    if stores == "elements":
        attrs["STAGED_STORES"], tag = False, tag + "ElementStores"
    return type(f"{base.__name__}{tag}", bases, attrs)


def product_fields(cfg: FrostFwdConfig) -> dict:
    """cfg's product fields (an experiment config's too), by name."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(FrostFwdConfig)}


def product_config(cfg: FrostFwdConfig) -> FrostFwdConfig:
    """cfg's product fields as a product config (cfg itself when it is one)."""
    return cfg if type(cfg) is FrostFwdConfig else FrostFwdConfig(**product_fields(cfg))


def product_algorithm(cfg: FrostFwdConfig) -> str:
    """The kernel layer the product compiles for cfg on TOOLING_ARCH."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import product_algorithm as picked

    return picked(cfg, TOOLING_ARCH)


def resolve(cfg: FrostFwdConfig, algorithm: str) -> str:
    """algorithm itself (FrostFwdExperiment validates it), or for PRODUCT the layer the
    product picks for cfg."""
    return product_algorithm(cfg) if algorithm == PRODUCT else algorithm


def default_decay(cfg: FrostFwdConfig, version: str, gram: str = "mma") -> str:
    """The decay knob left unset (None) for cfg's kernel layer `version` (a resolved one):
    the product's where wgmma runs for scalar gates (compile_kernel.product_decay: the
    four-role kernel where four_roles_apply, else scaled), else folded; folded beside a
    wgmma Gram too (its experiments ran on the folded chain)."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import FOUR_ROLE_DECAY
    from cudnn.linear_attention.frost.kernels.compile_kernel import four_roles_apply

    if not scalar_gate_wgmma(cfg, version):
        return "folded"
    if four_roles_apply(cfg) and gram == "mma":
        return FOUR_ROLE_DECAY
    return "scaled" if gram == "mma" else "folded"


def experiment(cfg: FrostFwdConfig, algorithm: str = PRODUCT, **knobs) -> FrostFwdExperiment:
    """cfg's product fields with a kernel layer (PRODUCT: the product's for cfg) and knobs
    (skip_stages, ldmatrix, gram, decay: default_decay where not given or None)."""
    version = resolve(cfg, algorithm)
    if knobs.get("decay") is None:
        knobs["decay"] = default_decay(cfg, version, knobs.get("gram", "mma"))
    return FrostFwdExperiment(**product_fields(cfg), algorithm=version, **knobs)


@functools.lru_cache(maxsize=None)
def _experiment(cfg: FrostFwdConfig, algorithm: str, skip_stages: tuple[str, ...], ldmatrix: bool, gram: str,
                decay: str = "folded", ws_regs: tuple[int, ...] = (), rows: str = "bulk",
                stores: str = "staged"):
    return experiment(cfg, algorithm, skip_stages=skip_stages, ldmatrix=ldmatrix, gram=gram, decay=decay,
                      ws_regs=ws_regs, rows=rows, stores=stores)


def tooling_config(cfg: FrostFwdConfig, algorithm: str = PRODUCT, skip_stages=(), ldmatrix: bool = True,
                   gram: str = "mma", decay: str | None = None, ws_regs: tuple[int, ...] = (), rows: str = "bulk",
                   stores: str = "staged"):
    """The config a tooling run of kernel layer `algorithm` (with those knobs) launches for
    the product config cfg: cfg itself where that is the layer the product picks for cfg
    and there are no knobs (so such runs share the product's compiled and stored kernels),
    else its FrostFwdExperiment. A wgmma gram applies where that Gram exists
    (gram_wgmma_applies) and is dropped elsewhere, so one switch can cover a mixed run; so
    is a scaled decay. decay None: default_decay (the product's). ws_regs: with the
    warp-specialised kernel only (dropped where it does not run). rows "async": where
    rows_async_applies, stores "elements": where staged_stores_apply (dropped elsewhere)."""
    version = resolve(cfg, algorithm)
    if gram != "mma" and not gram_wgmma_applies(cfg, version):
        gram = "mma"
    if decay is None:
        decay = default_decay(cfg, version, gram)
    if decay != "folded" and not scalar_gate_wgmma(cfg, version):
        decay = "folded"
    if decay in WS_DECAYS and not ws_applies(cfg):
        decay = "scaled"
    if gram != "mma" and decay != "folded" and (decay not in WS_DECAYS or not cfg.write_output):
        gram = "mma"  # the wgmma Gram combines with the warp-specialised producer only (output builds)
    if decay in FOUR_ROLES:  # the output-free builds (the backward's recompute) too: M alone
        gram = FOUR_ROLE_GRAM
    if decay not in WS_DECAYS or len(ws_regs) not in split_lengths(decay):
        ws_regs = ()
    if rows != "bulk" and not rows_async_applies(cfg, version, decay):
        rows = "bulk"
    if stores != "staged" and not staged_stores_apply(cfg, version, decay):
        stores = "staged"
    # the four-role decays force their Gram: the product's (four_roles_apply) is one of them
    product_gram = gram == "mma" or (decay in FOUR_ROLES and gram == FOUR_ROLE_GRAM)
    if (version == product_algorithm(cfg) and not skip_stages and ldmatrix and product_gram and not ws_regs
            and decay == default_decay(cfg, version) and rows == "bulk" and stores == "staged"):
        return product_config(cfg)  # not through the cache: an equal config cached earlier is another object
    return _experiment(cfg, algorithm, tuple(skip_stages), ldmatrix, gram, decay, tuple(ws_regs), rows, stores)


def engine_config(cfg: FrostFwdConfig, algorithm: str, training: bool = False, gram: str = "mma",
                  decay: str | None = None, ws_regs: tuple[int, ...] = (), rows: str = "bulk",
                  stores: str = "staged"):
    """What use_kernel(algorithm, training) launches for the product config cfg:
    tooling_config, except that forwards writing state checkpoints (training calls) stay on
    the product's kernel (cfg itself, whatever its layer) unless `training` is set (then
    `algorithm` must be one of TRAINING_ALGORITHMS, or PRODUCT)."""
    if cfg.write_checkpoints and not training:
        return cfg
    return tooling_config(cfg, algorithm, gram=gram, decay=decay, ws_regs=ws_regs, rows=rows, stores=stores)


@contextlib.contextmanager
def use_kernel(algorithm: str, training: bool = False, gram: str | None = None, decay: str | None = None):
    """Inside the block, frost_fwd and bind_fwd (so the FROST engines) compile and launch
    `algorithm`'s kernel wherever the product launches pipelined or wgmma (engine_config; with
    `training`, for the forwards that write state checkpoints and U as well): fwd._compiled,
    the launcher's one compile lookup, is wrapped, so every operand check still runs.
    Process-wide while it lasts (not for concurrent threads). gram: GRAMS, None (default):
    FROST_FWD_GRAM's (gram_requested), read on entry; a wgmma gram routes even a PRODUCT
    block, onto the wgmma layer with the wgmma Gram where it exists (tooling_config). decay: DECAYS,
    None (default): FROST_FWD_DECAY's (decay_requested; unset: the product's), the same way.
    The warp-specialised kernel's register split: FROST_FWD_WS_REGS's (ws_regs_requested);
    the vector chain's row copies and stores: FROST_FWD_ROWS's (rows_requested),
    FROST_FWD_STORES's (stores_requested)."""
    if algorithm not in ALGORITHMS and algorithm != PRODUCT:
        raise ValueError(f"use_kernel: algorithm must be one of {(*ALGORITHMS, PRODUCT)}, got {algorithm!r}")
    if training and algorithm not in (*TRAINING_ALGORITHMS, PRODUCT):  # oracle, mma write neither
        raise ValueError(f"use_kernel: training forwards run one of {(*TRAINING_ALGORITHMS, PRODUCT)}, "
                         f"got {algorithm!r}")
    gram = gram_requested() if gram is None else gram
    if gram not in GRAMS:
        raise ValueError(f"use_kernel: gram must be one of {GRAMS}, got {gram!r}")
    decay = decay_requested() if decay is None else decay
    if decay is not None and decay not in DECAYS:
        raise ValueError(f"use_kernel: decay must be one of {DECAYS} or None, got {decay!r}")
    ws_regs = ws_regs_requested(decay)
    rows = rows_requested()
    stores = stores_requested()
    if algorithm == PRODUCT and gram == "mma" and decay is None and rows == "bulk" and stores == "staged":  # what frost_fwd launches anyway
        yield
        return
    from cudnn.linear_attention.frost.kernels import fwd

    product = fwd._compiled

    def compiled(cfg, arch, ffi=None, device=None):
        return product(engine_config(cfg, algorithm, training, gram, decay, ws_regs, rows, stores), arch, ffi, device)

    fwd._compiled = compiled
    try:
        yield
    finally:
        fwd._compiled = product
