"""How a gloo rank spawned by torch.multiprocessing leaves its world (test tooling).

Seen on the 2-core CI machine, about one run in twelve: a rank aborted ("terminate called
without an active exception", SIGABRT) after every check of it had passed, either while
a peer still sat in the last barrier as it closed its sockets or in the interpreter's
teardown, where gloo objects still referenced from Python went with live threads. So a
rank that passed: tells a file store of its own (no gloo sockets) that it has left its
last collective, waits until every rank has, destroys the process group and exits
without the interpreter's teardown (os._exit(0) after flushing its output). A rank that
failed never gets here: it destroys the group and raises as before.
"""
from __future__ import annotations

import datetime
import os
import sys

import torch.distributed as dist


def leave_gloo_world(init_file: str, rank: int, world: int, timeout: datetime.timedelta) -> None:
    """Call after the last collective of a rank whose work succeeded; does not return."""
    store = dist.FileStore(init_file + ".leave", world)
    store.set(f"left{rank}", "1")
    store.wait([f"left{r}" for r in range(world)], timeout)
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
