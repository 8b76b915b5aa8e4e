"""`python -m cudnn precompile --arch` and the span split (torch_ops/README.md, "Long
sequences on few heads"): where a shape splits on the arch's flagship GPU, precompile lists
the span split's FROST kernels too, and those are the kernels the public ops launch.

The derivation (cli precompile.split_configs -> frost_configs.split_configs) is checked
two ways:
- against the public ops themselves: each op called on a CPU with the split forced
  (CUDNN_LA_SPAN_TOKENS), its FROST engines (forward, backward, span summaries) planned on
  a CPU handle as on an sm_90 GPU, and the launchers' kernel lookups replaced by
  recorders of the configs they would load (`frost_launches_on_cpu`); every recorded
  config must be one precompile lists, and every split config precompile lists must be
  one the call launched (up to the unaligned-gate variants a CPU allocation never meets);
- at the shapes of the automatic rule (H200: 132 SMs), against configs derived here from
  the unsplit call's by the changes the split makes (initial state per span, the
  transition pass's V = K, the backward summary's chain stage)."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import types
from collections.abc import Iterator

import pytest
import torch

from cudnn.cli import precompile, shapes
from cudnn.linear_attention import ops
from cudnn.linear_attention.frost import bwd_plan, la_engine, runtime_probe, summary_engine
from cudnn.linear_attention.frost.kernels import bwd as kernels_bwd
from cudnn.linear_attention.frost.kernels import fwd as kernels_fwd
from cudnn.linear_attention.frost.kernels import kernel_store
from cudnn.linear_attention.frost.kernels import summary as kernels_summary
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.compile_kernel import four_roles_possible
from cudnn.linear_attention.ops import _span_split as ss
from frost_bwd_experiments import BwdVariants, use_bwd_variants
from tests.torch_ops.frost_bwd_on_cpu import engines_patched

FAMILIES = ["gdn", "kda", "gdn2"]
H200 = 132


@pytest.fixture(autouse=True, scope="module")
def bench_inputs_once():
    """precompile derives the configs from CPU tensors of the shape (shapes.torch_inputs),
    and at the bench shapes below (1 x 16384 / 32768 tokens, 16 heads, K = V = 128:
    0.3-0.7 GB of random tensors) making them took ~5 s a call, most of this file's time;
    a test asks for the same ones two or three times. frost_configs reads only their
    shapes, dtypes and layouts, never writes them, so at a shape of over 4096 tokens the
    operands are made uninitialised and the last set serves the next call at the same
    (family, shape); the small shapes,
    whose tensors the op calls take gradients of, are made afresh each time."""
    made = shapes.torch_inputs
    last = {}

    def uninitialised(family, shape, device, seed):
        # torch_inputs' operands (names, dtypes from a one-chunk call; shapes.port_dims'
        # sizes; its cu_seqlens), left unwritten: torch.empty of a 0.7 GB set costs
        # nothing until touched, random fill ~4 s
        small = made(family, dataclasses.replace(shape, seqs=1, seq_len=64), device, seed)
        dims = shapes.port_dims(family, shape)
        return {name: torch.arange(0, shape.T + 1, shape.seq_len, dtype=t.dtype, device=device)
                if name == "cu_seqlens" else torch.empty(dims[name], dtype=t.dtype, device=device)
                for name, t in small.items()}

    def torch_inputs(family, shape, device, seed=0):
        if shape.T <= 4096:
            return made(family, shape, device, seed)
        key = (family, shape, str(device), seed)
        if key not in last:
            last.clear()  # one set at a time
            last[key] = uninitialised(family, shape, device, seed)
        return dict(last[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shapes, "torch_inputs", torch_inputs)
        yield


def _cpu_scratch(engine, workspace, size, device):
    # carve_scratch less its alignment check: a CPU allocation is not 128-byte aligned
    return None if size <= 0 else workspace.reshape(-1).view(torch.uint8)[:size]


@contextlib.contextmanager
def frost_launches_on_cpu(launched: list) -> Iterator[None]:
    """Every FROST engine (`*_frost`: forward, backward, summaries) plans CPU graphs as on
    an sm_90 GPU; each forward launch (frost_fwd, bind_fwd) appends the config its checks
    derive and each backward stage the config of the kernel it would load
    (kernels/bwd.py _stage_kernels), to `launched`; nothing runs."""
    def frost_fwd(*, scale, stream=None, workspace=None, **operands):
        launched.append(kernels_fwd.check_operands(**operands).config)

    def bind_fwd(*, scale, **operands):
        checked = kernels_fwd.check_operands(**operands)
        launched.append(checked.config)
        return kernels_fwd.BoundLaunch(
            checked.config, types.SimpleNamespace(ffi="tvm", fn=lambda *args: None),
            kernels_fwd.operand_signature(checked.tensors), checked.T, checked.N, float(scale))

    class Stage:
        def launch(self, *args) -> None:
            pass

    def stage_kernels(cfg, stages, device):
        chosen = kernels_bwd.stage_configs(cfg, stages)  # the launcher's own list
        launched.extend(chosen)
        return tuple(Stage() for _ in chosen)

    def frost(engine: str) -> bool:
        return engine.endswith("_frost")

    stream = lambda stream, device: types.SimpleNamespace(cuda_stream=0)  # noqa: E731
    patches = {
        (runtime_probe, "runtime_reason"): lambda engine, device=None: None,
        (runtime_probe, "kernel_arch"): lambda device: runtime_probe.KERNEL_ARCHS[90],
        (la_engine, "handle_device_reason"): (
            lambda graph, engine, reason=la_engine.handle_device_reason:
            None if frost(engine) else reason(graph, engine)),
        (la_engine, "_build_device"): (
            lambda handle, engine, build=la_engine._build_device:
            torch.device("cpu") if frost(engine) else build(handle, engine)),
        (la_engine, "torch_stream"): stream,
        (bwd_plan, "torch_stream"): stream,
        (summary_engine, "torch_stream"): stream,
        (la_engine, "carve_scratch"): _cpu_scratch,
        (bwd_plan, "carve_scratch"): _cpu_scratch,
        (summary_engine, "carve_scratch"): _cpu_scratch,
        (kernels_fwd, "frost_fwd"): frost_fwd,
        (kernels_fwd, "bind_fwd"): bind_fwd,
        (kernels_bwd, "_require_cuda"): lambda q: None,
        (kernels_bwd, "_stage_kernels"): stage_kernels,
    }
    with engines_patched(patches):
        yield


def _call(family: str, shape: shapes.Shape, backward: bool) -> None:
    """The public op at `shape` as `precompile` runs it with a GPU (run_on_devices)."""
    args = shapes.torch_inputs(family, shape, "cpu")
    if backward:
        for name in ("q", "k", "v"):
            args[name].requires_grad_(True)
    fn = getattr(ops, precompile.FUNCTIONS[family])
    o, _ = fn(**args, output_final_state=shape.final_state,
              use_qk_l2norm_in_kernel=shape.l2norm)
    if backward:
        o.float().sum().backward()


def _aligned(configs) -> set:
    """The configs less the unaligned-gate forward variants (a CPU allocation is aligned)."""
    return {c for c in configs if not (not isinstance(c, FrostBwdConfig)
                                       and c.gate_per_channel and not c.gate_align16)}


SMALL = {  # (shape, forced span): spans of 64 tokens over sequences of 200
    "plain": shapes.Shape(seqs=2, seq_len=200, H=2, HV=2, K=64, V=64),
    "h0-grouped-v": shapes.Shape(seqs=2, seq_len=200, H=2, HV=4, K=64, V=128,
                                 initial_state=True, l2norm=True),
    "no-final": shapes.Shape(seqs=1, seq_len=300, H=4, HV=4, K=128, V=64, final_state=False),
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", list(SMALL))
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "fwd+bwd"])
@pytest.mark.parametrize("no_output", ["0", "1"], ids=["summary-out", "summary-no-out"])
def test_precompile_lists_what_a_split_call_launches(family, case, backward, no_output,
                                                     monkeypatch):
    shape = SMALL[case]
    monkeypatch.setenv(ss.ENV, "64")
    monkeypatch.setenv(kernels_summary.NO_OUTPUT_ENV, no_output)
    monkeypatch.delenv(ss.BACKWARD_ENV, raising=False)
    launched = []
    with torch.no_grad() if not backward else contextlib.nullcontext(), \
            frost_launches_on_cpu(launched):
        _call(family, shape, backward)
    unsplit = set(precompile.frost_configs([family], shape, backward))
    span, split = precompile.split_configs([family], shape, backward, sms=H200)
    assert span == 64
    listed = unsplit | set(split)
    assert launched and set(launched) <= listed, set(launched) - listed
    # the call did split: it launched kernels the unsplit call's list lacks ...
    assert set(launched) - unsplit
    # ... and every split kernel precompile adds is one it launched
    assert _aligned(split) <= set(launched), _aligned(split) - set(launched)
    # the summary passes follow the switch as the summary plan read it (the backward's
    # recompute forward, also output-free, writes checkpoints: not a summary pass)
    summary_passes = [c for c in launched if not isinstance(c, FrostBwdConfig)
                      and not c.write_output and not c.write_checkpoints]
    assert bool(summary_passes) == (no_output == "1")


def test_without_the_split_the_call_launches_only_what_precompile_listed(monkeypatch):
    """The harness's control: forced off, the call launches only the unsplit call's kernels
    and precompile adds none."""
    shape = SMALL["plain"]
    monkeypatch.setenv(ss.ENV, "0")
    launched = []
    with frost_launches_on_cpu(launched):
        _call("kda", shape, backward=True)
    assert launched and set(launched) <= set(precompile.frost_configs(["kda"], shape, True))
    assert precompile.split_configs(["kda"], shape, True, sms=H200) == (None, [])


# -- the automatic rule at the bench shapes (H200) ----------------------------------------

def _long(seqs: int, seq_len: int) -> shapes.Shape:
    return shapes.Shape(seqs=seqs, seq_len=seq_len, H=16, HV=16, K=128, V=128)


def _fwd(configs) -> list:
    return [c for c in configs if not isinstance(c, FrostBwdConfig)]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_long_sequence_on_few_heads_lists_the_split_forward(family, monkeypatch):
    monkeypatch.delenv(ss.ENV, raising=False)
    monkeypatch.setenv(kernels_summary.NO_OUTPUT_ENV, "0")  # the passes with the output
    shape = _long(1, 32768)
    (call,) = _aligned(_fwd(precompile.frost_configs([family], shape, backward=False)))
    span, split = precompile.split_configs([family], shape, backward=False, sms=H200)
    assert span == ss.auto_span_tokens(32768, 1, 16, H200) == 4096
    assert not [c for c in split if isinstance(c, FrostBwdConfig)]
    # independently: the summary's final state from zero is the call's own forward; its
    # transition pass starts from the identity with v = 0 of width K (V = K); the forward
    # over the spans starts from each span's fp32 entering state
    summary = call
    transition = dataclasses.replace(call, V=call.K, has_initial_state=True)
    spans = dataclasses.replace(call, has_initial_state=True)
    assert call.has_final_state and not call.has_initial_state and call.state_dtype == "float32"
    assert {summary, transition, spans} <= set(split)
    assert _aligned(split) == {summary, transition, spans}
    monkeypatch.delenv(kernels_summary.NO_OUTPUT_ENV)  # the default: the output-free passes
    _, lean = precompile.split_configs([family], shape, backward=False, sms=H200)
    # without an output no kernel depends on the length: `pipelined` stays off
    # (compile_kernel.four_roles_possible)
    assert {dataclasses.replace(summary, write_output=False, pipelined=False),
            dataclasses.replace(transition, write_output=False, pipelined=False), spans} == _aligned(lean)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("on_forward", ["0", "1"], ids=["states-kernel", "states-on-forward"])
def test_a_training_call_lists_the_split_backward(family, on_forward, monkeypatch):
    """1 x 16384 splits only by the training rule (MIN_GAIN_TRAINING): with --backward.
    On the product's recompute path the spans' states stage is the output-free training
    forward, their chain the forward-values chain and their grads the checkpoint reader's
    (kernels/bwd.py recompute_configs); the test tooling's FROST_BWD_RECOMPUTE_FORWARD=0
    variant (the states kernel) gives the unsplit list the check derives from."""
    monkeypatch.delenv(ss.ENV, raising=False)
    monkeypatch.delenv(ss.BACKWARD_ENV, raising=False)
    # the unsplit list below: the recompute path's states on the backward's own kernel
    # (the test tooling's variant)
    with use_bwd_variants(BwdVariants(recompute_forward=False)):
        shape = _long(1, 16384)
        assert precompile.split_configs([family], shape, backward=False, sms=H200) == (None, [])
        span, split = precompile.split_configs([family], shape, backward=True, sms=H200)
        assert span == ss.auto_span_tokens(16384, 1, 16, H200, ss.MIN_GAIN_TRAINING) == 4096
        bwd = {c for c in split if isinstance(c, FrostBwdConfig)}
        # independently, from the unsplit call's backward (recomputing: no checkpoints): each
        # stage of the backward over the spans starts from an fp32 entering state, writes its
        # gradient and gets a leaving-state gradient; the backward summary is the chain stage
        # alone with no final-state gradient
        unsplit = set(precompile.frost_configs([family], shape, backward=True))
        plain = {c.stage: c for c in unsplit if isinstance(c, FrostBwdConfig) and not c.checkpoints
                 and not c.forward_values and c.stage != "values"
                 and (c.dht_dtype == "float32" or c.stage != "chain")}
        assert set(plain) == {"states", "chain", "grads"}

        def from_entering(c, dht):
            fwd = dataclasses.replace(c.fwd, has_initial_state=True, state_dtype="float32")
            return dataclasses.replace(c, fwd=fwd, dh0_dtype="float32", dht_dtype=dht)
        spans = {from_entering(plain["states"], None), from_entering(plain["chain"], "float32"),
                 plain["grads"]}
        summary = from_entering(plain["chain"], None)
        assert bwd == spans | {summary}, (bwd, spans | {summary})
        assert summary not in unsplit and from_entering(plain["chain"], "float32") not in unsplit
    if on_forward == "1":  # the product's
        _, split_on = precompile.split_configs([family], shape, backward=True, sms=H200)
        states = from_entering(plain["states"], None)
        # the spans average 4096 tokens, so the states stage keeps the forward's `pipelined`
        # (kernels/bwd.py check_bwd_operands; the backward kernels drop it: with_stage)
        # where it selects a kernel (GDN: compile_kernel.four_roles_possible)
        forward = dataclasses.replace(states.fwd, has_final_state=False, write_checkpoints=True,
                                      write_values=True, write_output=False)
        forward = dataclasses.replace(forward, pipelined=four_roles_possible(forward))
        chain = dataclasses.replace(from_entering(plain["chain"], "float32"), forward_values=True)
        grads = dataclasses.replace(plain["grads"], checkpoints=True)
        assert {c for c in split_on if isinstance(c, FrostBwdConfig)} == {chain, grads, summary}
        assert forward in split_on and states not in split_on
    # the backward summary's unsplit-path switch: CUDNN_LA_SPAN_BACKWARD=0 keeps the forward
    # rule, which does not split 1 x 16384
    monkeypatch.setenv(ss.BACKWARD_ENV, "0")
    assert precompile.split_configs([family], shape, backward=True, sms=H200) == (None, [])


@pytest.mark.parametrize("why", ["pairs-fill-the-gpu", "forced-off", "h100-pcie"])
def test_nothing_extra_where_the_call_does_not_split(why, monkeypatch):
    monkeypatch.delenv(ss.ENV, raising=False)
    shape, sms = _long(1, 32768), H200
    if why == "pairs-fill-the-gpu":
        shape = _long(8, 4096)
    elif why == "forced-off":
        monkeypatch.setenv(ss.ENV, "0")
    else:
        sms = 114  # 7 spans of 16 heads per wave: fewer than MIN_GAIN
    for backward in (False, True):
        if why == "h100-pcie" and backward:
            continue  # the training rule does split there (7 >= MIN_GAIN_TRAINING)
        assert precompile.split_configs(FAMILIES, shape, backward, sms) == (None, [])


def test_the_command_compiles_the_split_kernels_too(tmp_path, monkeypatch, capsys):
    """`precompile --arch sm_90a` at a shape that splits on 132 SMs: the split's configs are
    among those it compiles (all in the cache already here, so it compiles none), and it
    says how many the split adds; --sms 114 adds none (run in this process: the entry
    itself is the subprocess's)."""
    shape = _long(1, 32768)
    env = {k: v for k, v in os.environ.items()
           if k not in (ss.ENV, ss.BACKWARD_ENV, kernels_summary.NO_OUTPUT_ENV)}
    unsplit = precompile.frost_configs(["gdn"], shape, backward=False)
    span, split = precompile.split_configs(["gdn"], shape, backward=False, sms=H200)
    extra = [c for c in split if c not in unsplit]
    assert extra
    monkeypatch.setenv(kernel_store.STORE_ENV, str(tmp_path))
    store = kernel_store.active_store()
    for cfg in unsplit + split:
        key = kernel_store.entry_key(cfg, "sm_90a", "cute", host=kernel_store.GENERIC_X86_64)
        store.sidecar(key).parent.mkdir(parents=True, exist_ok=True)
        store.sidecar(key).write_text("{}")
    flags = ("--seqs", "1", "--seq_len", "32768", "--heads", "16", "--head_dim", "128",
             "--nodecode")
    env.update(PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               **{kernel_store.STORE_ENV: str(tmp_path)})
    for sms, added in ((None, len(extra)), ("114", None)):
        command = ["-m", "cudnn", "precompile", "gdn", "--arch", "sm_90a", *flags]
        if sms:
            command += ["--sms", sms]
        if sms is None:  # the command as a user runs it
            result = subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True,
                                    timeout=600)
            assert result.returncode == 0, result.stderr
            stdout = result.stdout
        else:  # the same entry (cudnn.cli.main.run) in this process: no second start-up and
            # 0.7 GB of random inputs (bench_inputs_once serves them)
            from cudnn.cli import main as cli_main

            for name in (ss.ENV, ss.BACKWARD_ENV, kernels_summary.NO_OUTPUT_ENV):  # as `env`
                monkeypatch.delenv(name, raising=False)
            capsys.readouterr()
            with pytest.raises(SystemExit) as exited:
                cli_main.run(["python -m cudnn", *command[2:]])
            assert exited.value.code in (None, 0), exited.value
            stdout = capsys.readouterr().out
        total = len(unsplit) + (added or 0)
        assert (f"FROST: {total} kernel configs, {total} already in {tmp_path}; "
                "compiling 0 for sm_90a") in stdout, stdout
        if added:
            assert (f"span split: on 132 SMs this shape runs as spans of {span} tokens "
                    f"(torch_ops/README.md); its kernels add {added} config(s)") in stdout
        else:
            assert "span split" not in stdout


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
