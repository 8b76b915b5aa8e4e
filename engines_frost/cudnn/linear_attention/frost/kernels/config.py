"""The static configuration of one compiled FROST forward kernel (its compile-cache key).

Everything the CuTe DSL kernel specialises on at compile time lives in FrostFwdConfig:
the io/state dtypes, head counts, head dims, the family flags and which optional
operands exist. Runtime quantities (token count, sequence count, scale, pointers,
stream) are not part of it. Pure Python: no torch, no cutlass.
"""
from __future__ import annotations

import dataclasses

IO_DTYPES = ("bfloat16", "float16")
STATE_DTYPES = ("float32", "bfloat16")
HEAD_DIMS = (64, 128)
#: threads per role of the warp-specialised kernels (two warpgroups each: fwd_ws.py,
#: bwd_chain_ws.py), and the register file their setmaxnreg split shares
WS_ROLE_THREADS = 256
REGISTER_FILE = 65536
#: tokens per sequence, on average over a launch, from which FrostFwdConfig.pipelined is set
PIPELINE_MIN_TOKENS = 512


def register_split_ok(regs, lengths=(2,)) -> bool:
    """Whether regs is a setmaxnreg split of the warp-specialised kernels: a (consumer,
    producer) pair (two roles of WS_ROLE_THREADS) or a (chain, math, copies) triple (the
    four-role forward, fwd_ws4.py: two chain warpgroups, one math, one copy warpgroup);
    multiples of 8 in [24, 256] that fit the register file; lengths: the forms accepted."""
    if not (isinstance(regs, tuple) and len(regs) in lengths and len(regs) in (2, 3)
            and all(isinstance(r, int) and 24 <= r <= 256 and r % 8 == 0 for r in regs)):
        return False
    if len(regs) == 2:
        return WS_ROLE_THREADS * sum(regs) <= REGISTER_FILE
    return (WS_ROLE_THREADS // 2) * (2 * regs[0] + regs[1] + regs[2]) <= REGISTER_FILE


def parse_register_split(text: str, name: str, lengths=(2,)) -> tuple[int, ...]:
    """A "consumer,producer" (or "chain,math,copies") setting (the experiment switches'
    FROST_*_WS_REGS, `name`) as the tuple, () when empty; ValueError naming `name` for
    anything register_split_ok refuses."""
    text = text.strip()
    if not text:
        return ()
    try:
        regs = tuple(int(x) for x in text.split(","))
    except ValueError:
        regs = None
    if regs is None or not register_split_ok(regs, lengths):
        forms = " or ".join(("'consumer,producer'", "'chain,math,copies'")[n - 2] for n in lengths)
        raise ValueError(f"{name} must be {forms} (multiples of 8 in [24, 256] that fit {REGISTER_FILE} "
                         f"registers), got {text!r}")
    return regs


def check_io_state_dims(cfg, bad) -> None:
    """The rules every FROST kernel config shares (the chunked and the recurrent ones):
    io dtype, a state dtype exactly when a state operand exists, head dims; `bad(name,
    expected)` raises naming the field."""
    if cfg.io_dtype not in IO_DTYPES:
        bad("io_dtype", f"one of {IO_DTYPES}")
    has_state = cfg.has_initial_state or cfg.has_final_state
    if has_state and cfg.state_dtype not in STATE_DTYPES:
        bad("state_dtype", f"one of {STATE_DTYPES} when a state operand is given")
    if not has_state and cfg.state_dtype is not None:
        bad("state_dtype", "None without initial_state and final_state")
    for name in ("K", "V"):
        if getattr(cfg, name) not in HEAD_DIMS:
            bad(name, f"one of {HEAD_DIMS}")


@dataclasses.dataclass(frozen=True)
class FrostFwdConfig:
    """One kernel specialisation. Families: GDN = scalar gate and beta; KDA = per-channel gate,
    scalar beta; GDN-2 = per-channel gate, per-channel erase gate (beta) and a write gate w.
    Every field is a product field: the product compiles one kernel family (fwd_pipelined.py and
    its subclass fwd_wgmma.py, chosen from the config and the arch alone:
    compile_kernel.product_algorithm), so no field picks an algorithm, and experiment switches (other kernel layers, stages
    compiled out, element-wise operand loads) live in the test and bench tooling's subclass
    (engines_frost/tests/frost_fwd_experiments.py), never in a product config's key."""

    io_dtype: str  # "bfloat16" | "float16": q, k, v, out (and GDN-2 beta, w)
    state_dtype: str | None  # "float32" | "bfloat16" | None (no state operand)
    H: int
    HK: int
    HV: int
    K: int
    V: int
    gate_per_channel: bool
    beta_per_channel: bool
    has_w: bool
    use_l2norm: bool
    has_initial_state: bool
    has_final_state: bool
    # g's base address is 16-byte aligned (frost_fwd reads it off the pointer; vector gates
    # only): the pipelined layer then stages gate rows by 16-byte copies instead of 4-byte ones.
    gate_align16: bool = False
    # Also write the graph's state_checkpoints output (bf16 [T // 64 + N, HO, V, K],
    # the state entering every 64-token chunk, rows packed as checkpoints.py describes);
    # the kernel then takes one more pointer (operand_dtypes).
    write_checkpoints: bool = False
    # With write_checkpoints only: also write U = (I + M)^-1 (W0 - KBA S), the chunk
    # solve's values, per token (bf16 [T, HO, V], the rows the backward's states kernel
    # writes and its grads kernel reads), so a training backward launches neither states
    # nor values (NOTES_bwd.md v1.3); one more pointer, ``values``, after state_checkpoints.
    write_values: bool = False
    # False: a forward that yields only its final state (the span summaries' two passes,
    # summary.py): everything that serves only the output o (q's rows, their L2 norm and
    # decay-folded operand, the q k^T half of the Gram stage, the chain's O products and
    # the o stores, the grid row that zeroes uncovered output rows) is compiled out; the
    # state path is the same code. q and out are then absent at launch (null pointers the
    # kernel never reads; fwd.check_operands: None). The plain launchers (pipelined, wgmma), and the
    # values launchers with write_checkpoints and write_values: the backward's recompute of
    # its states and U on the forward kernel (bwd.py recompute_configs).
    write_output: bool = True
    # The launch's sequences average at least PIPELINE_MIN_TOKENS tokens (check_operands
    # sets it from T and N): the bf16 GDN forwards with an output at K = V = 128 then run
    # the four-role kernel (fwd_ws4.py; compile_kernel.product_decay), whose pipeline across
    # a sequence's chunks costs set-up that a one-chunk sequence does not repay.
    pipelined: bool = False

    def __post_init__(self):
        def bad(name, expected):
            raise ValueError(f"FrostFwdConfig: {name} must be {expected}, got {getattr(self, name)!r}")

        check_io_state_dims(self, bad)
        for name in ("H", "HK", "HV"):
            if getattr(self, name) < 1:
                bad(name, ">= 1")
        if self.HO % self.H or self.HO % self.HV:
            bad("H", f"a divisor of HO = max(H, HV) = {self.HO} (HV = {self.HV})")
        if self.HK not in (self.H, self.HV):
            bad("HK", f"equal to H ({self.H}) or HV ({self.HV})")
        if self.beta_per_channel and not (self.gate_per_channel and self.has_w):
            bad("beta_per_channel", "False unless gate_per_channel and has_w (GDN-2)")
        if self.has_w and not self.beta_per_channel:
            bad("has_w", "False unless beta_per_channel (GDN-2)")
        if self.gate_align16 and not self.gate_per_channel:
            bad("gate_align16", "False for scalar gates")
        if self.write_values and not self.write_checkpoints:
            bad("write_values", "False unless write_checkpoints (U is only useful with the states it came from)")
        if not self.write_output and self.write_checkpoints and not self.write_values:
            bad("write_output", "True with write_checkpoints unless write_values (the output-free "
                "training forward is the backward's recompute: checkpoints and U)")
        if not self.write_output and not (self.has_final_state or self.write_checkpoints):
            bad("write_output", "True without final_state or checkpoints (the kernel would write nothing)")

    @property
    def HO(self) -> int:
        return max(self.H, self.HV)

    def heads_of(self, h):
        """(q head, k head, v head, output head) of output head h (a Python int or a traced
        index): grouped heads share a source head by integer division, so HO // H
        consecutive output heads read the same q head."""
        return (h // (self.HO // self.H), h // (self.HO // self.HK), h // (self.HO // self.HV), h)

    @property
    def family(self) -> str:
        if self.has_w:
            return "gdn2"
        return "kda" if self.gate_per_channel else "gdn"


OPERANDS = ("q", "k", "v", "g", "beta", "w", "cu_seqlens", "out", "initial_state", "final_state")
#: the extra operand of a kernel compiled with write_checkpoints (after the OPERANDS)
CHECKPOINT_OPERAND = "state_checkpoints"
#: the extra operand of a kernel compiled with write_values (last in its argument list)
VALUES_OPERAND = "values"


def operand_dtypes(cfg: FrostFwdConfig) -> dict[str, str]:
    """Element dtype name of each kernel operand, in launch-ABI order (launch_abi.py): the
    OPERANDS, then state_checkpoints (bf16) for a kernel that writes them, then values (bf16)
    for one that writes U too."""
    io = cfg.io_dtype
    st = cfg.state_dtype or "float32"
    dtypes = {
        "q": io, "k": io, "v": io, "g": "float32", "beta": io if cfg.beta_per_channel else "float32",
        "w": io, "cu_seqlens": "int32", "out": io, "initial_state": st, "final_state": st,
    }
    if cfg.write_checkpoints:
        dtypes[CHECKPOINT_OPERAND] = "bfloat16"
    if cfg.write_values:
        dtypes[VALUES_OPERAND] = "bfloat16"
    return dtypes


def abi_operands(cfg: FrostFwdConfig) -> tuple[str, ...]:
    """The operand names of cfg's kernel, in launch order."""
    return tuple(operand_dtypes(cfg))


def operand_alignment(cfg: FrostFwdConfig) -> dict[str, int]:
    """Byte alignment the kernel assumes for each operand's base pointer: 16 for 16-bit
    operands (vector loads), 4 for 32-bit ones except g under gate_align16 (16)."""
    align = {name: 4 if dt in ("float32", "int32") else 16 for name, dt in operand_dtypes(cfg).items()}
    if cfg.gate_align16:
        align["g"] = 16
    return align
