"""The pipelined chain's protocol as data (bwd_chain_pipelined.py; NOTES_bwd.md v1.6).

Which shared tensors each part of the pipelined chain kernel reads and writes, phase by
phase (a phase = the code between two CTA barriers). Pure Python: the kernel takes
DOUBLED from here, and engines_frost/tests/frost_chain_pipeline_protocol_test.py runs the
table over a sequence of chunks to check that no phase lets one part write a tensor (or
copy) another part reads or writes, and that every read sees the chunk it is meant to.
The kernel is written by hand to this table; a change to its phase order must change
the table (and pass the test) first.

Entries are (part, "r" | "w", tensor, copy): copy "cur" is chunk j's copy (j % 2), "nxt"
the other one, None a tensor with one copy. Parts: chain (chunk j's dU, dR and dS
update), rows / operands / gram (chunk j - 1's prep stages), loads (the cp.async of chunk
j - 1's staged rows, issued after chunk j + 1's BAR 3, landing while that chunk's last
update part and phase A run; waited for before BAR 1), chain_prev (chunk j + 1's
update for token blocks 2, 3: the kernel runs it after chunk j + 1's last barrier, with no
barrier before chunk j's A, so it belongs to phase A here).
"""
from __future__ import annotations

# written by chunk j - 1's prep while chunk j's chain still reads them: two copies
DOUBLED = ("qat", "kbat", "alast", "dot")
COPIES = 2
STAGING = ("q", "k", "g", "beta", "w0")  # the staged rows (w0: chunk's raw dO rows)
# CTA barriers before the chunk loop: after the first rows' copies, rows, operands, Gram
PROLOGUE_BARRIERS = 4

PHASES = (
    ("A", (
        ("chain_prev", "r", "dot", "nxt"), ("chain_prev", "r", "qat", "nxt"), ("chain_prev", "r", "kbat", "nxt"),
        ("chain", "r", "dot", "cur"), ("chain", "r", "pt", None), ("chain", "r", "kd", None),
        *(("loads", "w", t, None) for t in STAGING),
    )),
    ("B", (
        ("chain", "r", "mnegt", None), ("chain", "r", "dinvt", None),
        ("chain", "w", "wbuf", None), ("chain", "r", "wbuf", None),
        ("rows", "r", "q", None), ("rows", "r", "k", None), ("rows", "r", "w0", None), ("rows", "r", "g", None),
        ("rows", "w", "q", None), ("rows", "w", "k", None), ("rows", "w", "g", None), ("rows", "w", "dot", "nxt"),
    )),
    ("C", (
        ("chain", "r", "dot", "cur"), ("chain", "r", "alast", "cur"), ("chain", "r", "qat", "cur"),
        ("chain", "r", "kbat", "cur"),
        *(("operands", "r", t, None) for t in ("q", "k", "g", "beta")),
        ("operands", "w", "kd", None), ("operands", "w", "qat", "nxt"), ("operands", "w", "kbat", "nxt"),
        ("operands", "w", "alast", "nxt"),
        *(("gram", "r", t, None) for t in ("q", "k", "g", "beta")),
        ("gram", "w", "pt", None), ("gram", "w", "mnegt", None), ("gram", "w", "md", None),
        ("gram", "r", "md", None), ("gram", "w", "dinvt", None),
    )),
)
