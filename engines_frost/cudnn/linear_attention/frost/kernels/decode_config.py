"""The static configuration of the FROST recurrent (decode) kernel, and its launch ABI.

The recurrent kernel (decode_kernel.py) walks each sequence token by token with the state
in registers: the serving path for decode steps (one token per sequence) and speculative
decoding (a few tokens per sequence), where the chunked kernels would spend a 64-token
chunk on each token. It reads the state from, and writes it back into, a pool addressed by
per-sequence slot indices, and applies the gates (safe gate, beta sigmoid, linear domain)
itself. Everything it specialises on at compile time is a FrostDecodeConfig field; token,
sequence and pool-row counts, the scale, the pointers and the stream are runtime arguments:

    (q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state, state_indices,
     a_log, dt_bias, checkpoints : cute.Pointer, T, N, S : Int32, scale : Float32, stream)

S is the number of rows of the state buffers (the pool size with state_indices, else N).
Pure Python: no torch, no cutlass.
"""
from __future__ import annotations

import dataclasses

from cudnn.linear_attention.frost.kernels.config import check_io_state_dims
#: value rows one CTA keeps: its V tile (4 warps, BLOCK_V / 4 rows each); 64 only under
#: FROST_DECODE_BV64 (decode.choose_block_v), until measured
BLOCK_VS = (16, 32, 64)
WARPS = 4

DECODE_OPERANDS = ("q", "k", "v", "g", "beta", "w", "cu_seqlens", "out", "initial_state",
                   "final_state", "state_indices", "a_log", "dt_bias", "checkpoints")


@dataclasses.dataclass(frozen=True)
class FrostDecodeConfig:
    """One recurrent-kernel specialisation (GDN: scalar gate and beta; KDA: per-channel
    gate; GDN-2: per-channel gate and erase gate beta, write gate w)."""

    family: str                 # "gdn" | "kda" | "gdn2"
    io_dtype: str               # q, k, v, out (and GDN-2 beta, w)
    state_dtype: str | None     # initial/final state; None without either
    H: int
    HK: int
    HV: int
    K: int
    V: int
    use_l2norm: bool
    has_initial_state: bool
    has_final_state: bool
    has_pool: bool              # state_indices selects each sequence's state row
    checkpoint_every: int = 0   # > 0: state before tokens 0, n, 2n, ... of each sequence
    checkpoint_dtype: str | None = None
    beta_sigmoid: bool = False
    neg_eigval: bool = False    # beta_eff = 2 sigmoid(beta)
    safe_gate: bool = False
    has_a_log: bool = False
    has_dt_bias: bool = False
    gate_lower_bound: float = -5.0  # KDA / GDN-2 safe gate (log space)
    linear_gate: bool = False   # gate_domain="linear": gamma = ln(g + 1e-10)
    block_v: int = 32
    # lane l holds channels l * KPL ... l * KPL + KPL - 1 (KPL = K / 32) instead of l, l + 32,
    # ...: state rows and K-vectors move in KPL-element vector accesses (16 B for fp32 rows
    # at K = 128); the pointers of those operands must then be aligned to that width
    # (decode_operand_alignment). Off by default until measured (NOTES_decode.md).
    contiguous_channels: bool = False

    def __post_init__(self):
        def bad(name, expected):
            raise ValueError(f"FrostDecodeConfig: {name} must be {expected}, got "
                             f"{getattr(self, name)!r}")

        if self.family not in ("gdn", "kda", "gdn2"):
            bad("family", "'gdn', 'kda' or 'gdn2'")
        check_io_state_dims(self, bad)
        if self.has_pool and not (self.has_initial_state or self.has_final_state):
            bad("has_pool", "False without a state operand")
        if min(self.H, self.HK, self.HV) < 1 or self.HO % self.H or self.HO % self.HV:
            bad("H", f"a divisor of HO = max(H, HV) (HV = {self.HV}, HK = {self.HK})")
        if self.HK not in (self.H, self.HV):
            bad("HK", f"equal to H ({self.H}) or HV ({self.HV})")
        if self.checkpoint_every < 0:
            bad("checkpoint_every", ">= 0")
        if (self.checkpoint_every > 0) != (self.checkpoint_dtype is not None):
            bad("checkpoint_dtype", "set exactly when checkpoint_every > 0")
        if self.checkpoint_dtype not in (None, "float32", self.io_dtype):
            bad("checkpoint_dtype", f"float32 or the io dtype {self.io_dtype}")
        if self.neg_eigval and not self.beta_sigmoid:
            bad("neg_eigval", "False unless beta_sigmoid")
        if (self.has_a_log or self.has_dt_bias) and not self.safe_gate:
            bad("safe_gate", "True when a_log or dt_bias is given")
        if self.safe_gate and self.linear_gate:
            bad("linear_gate", "False under safe_gate")
        if self.block_v not in BLOCK_VS or self.V % self.block_v:
            bad("block_v", f"one of {BLOCK_VS} dividing V")

    @property
    def HO(self) -> int:
        return max(self.H, self.HV)

    @property
    def gate_per_channel(self) -> bool:
        return self.family != "gdn"

    @property
    def beta_per_channel(self) -> bool:
        return self.family == "gdn2"


def decode_operand_dtypes(cfg: FrostDecodeConfig) -> dict[str, str]:
    """Element dtype of each operand, in ABI order."""
    io, st = cfg.io_dtype, cfg.state_dtype or "float32"
    return {
        "q": io, "k": io, "v": io, "g": "float32",
        "beta": io if cfg.beta_per_channel else "float32", "w": io, "cu_seqlens": "int32",
        "out": io, "initial_state": st, "final_state": st, "state_indices": "int32",
        "a_log": "float32", "dt_bias": "float32", "checkpoints": cfg.checkpoint_dtype or io,
    }


def _element_bytes(dtype: str) -> int:
    return 2 if dtype in ("bfloat16", "float16") else 4


def channel_operands(cfg: FrostDecodeConfig) -> tuple[str, ...]:
    """Operands whose rows run over the K channels (a lane reads its channels of them)."""
    per_channel = ("g", "dt_bias") if cfg.gate_per_channel else ()
    return ("q", "k", *per_channel, *(("beta",) if cfg.beta_per_channel else ()),
            "initial_state", "final_state", "checkpoints")


def channel_vector_bytes(cfg: FrostDecodeConfig, dtype: str) -> int:
    """Bytes of one lane's channel vector under contiguous_channels (at most 16: one
    LDG.128; wider vectors are several)."""
    return min(16, cfg.K // 32 * _element_bytes(dtype))


def decode_operand_alignment(cfg: FrostDecodeConfig) -> dict[str, int]:
    """Element alignment (element-wise accesses), except under contiguous_channels, where a
    lane's channels of a K-row move as one vector: those operands need the vector's width."""
    dtypes = decode_operand_dtypes(cfg)
    align = {name: _element_bytes(dt) for name, dt in dtypes.items()}
    if cfg.contiguous_channels:
        for name in channel_operands(cfg):
            align[name] = max(align[name], channel_vector_bytes(cfg, dtypes[name]))
    return align


def checkpoint_rows(T: int, N: int, every: int) -> int:
    """Rows of the checkpoint buffer (spec: max(T // n + N, 1))."""
    return max(T // every + N, 1)


def state_bytes(cfg: FrostDecodeConfig, N: int) -> int:
    """Bytes of state one call reads and writes (each once): N x HO x V x K per direction."""
    per = 4 if (cfg.state_dtype or "float32") == "float32" else 2
    rows = N * cfg.HO * cfg.V * cfg.K * per
    return rows * (int(cfg.has_initial_state) + int(cfg.has_final_state))
