"""`cudnn.linear_attention.fla.install()`: what it replaces, when, and that it is undone.

- A Qwen3-Next model built before install() runs this library's op from the next call on
  (the reference engine sees the forward and backward), and transformers' torch path
  again after uninstall();
- modules imported after install() are patched as they load;
- callers of FLA itself (a stand-in `fla` package here, FLA needs a GPU) get the drop-in,
  also through names they imported before install();
- importing cudnn and cudnn.linear_attention.fla changes neither torch's import system nor
  transformers (each in a fresh process).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import cudnn.linear_attention.fla as cfla
from tests.fla.tiny_models import gated_delta_net_layer, qwen3_next_config
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed

from transformers.models.kimi_linear import modeling_kimi_linear as kimi  # noqa: E402
from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next  # noqa: E402


def run_python(code: str, extra_path: str | None = None) -> str:
    """Run `code` in a fresh interpreter with this test's import path; returns stdout."""
    path = ([extra_path] if extra_path else []) + [p for p in sys.path if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_install_routes_a_built_model_to_the_ops_and_uninstall_restores():
    torch_path = (qwen3_next.torch_chunk_gated_delta_rule,
                  qwen3_next.torch_recurrent_gated_delta_rule,
                  kimi.chunk_kimi_delta_attention, kimi.recurrent_kimi_delta_attention)
    layer = gated_delta_net_layer(qwen3_next_config())
    x = torch.randn(1, 6, 32)
    with reference_engines_installed():
        assert not cfla.is_installed()
        replaced = cfla.install()
        try:
            assert replaced >= 4
            assert qwen3_next.torch_chunk_gated_delta_rule is cfla.chunk_gated_delta_rule
            assert qwen3_next.torch_recurrent_gated_delta_rule is \
                cfla.fused_recurrent_gated_delta_rule
            assert kimi.chunk_kimi_delta_attention is cfla.chunk_kda
            assert kimi.recurrent_kimi_delta_attention is cfla.fused_recurrent_kda
            assert cfla.install() == 0  # idempotent
            engine = reference_engine("gdn")
            before = len(engine.calls)
            layer(x).sum().backward()
            assert [c[0] for c in engine.calls[before:]] == ["fwd", "bwd"]
        finally:
            cfla.uninstall()
        assert not cfla.is_installed()
        assert (qwen3_next.torch_chunk_gated_delta_rule,
                qwen3_next.torch_recurrent_gated_delta_rule,
                kimi.chunk_kimi_delta_attention, kimi.recurrent_kimi_delta_attention) == torch_path
        before = len(engine.calls)
        layer(x)
        assert len(engine.calls) == before  # transformers' torch path again


def test_importing_cudnn_changes_nothing_and_later_imports_are_patched():
    out = run_python("""
        import sys
        hooks = list(sys.meta_path)
        import cudnn, cudnn.linear_attention.fla as cfla
        assert sys.meta_path == hooks, "importing changed sys.meta_path"
        assert not any(m == "transformers" or m.startswith("transformers.")
                       for m in sys.modules), "importing loaded transformers"
        from transformers.models.qwen3_next import modeling_qwen3_next as m
        assert m.torch_chunk_gated_delta_rule is not cfla.chunk_gated_delta_rule
        cfla.install()
        from transformers.models.kimi_linear import modeling_kimi_linear as k  # after
        assert k.chunk_kimi_delta_attention is cfla.chunk_kda
        assert m.torch_chunk_gated_delta_rule is cfla.chunk_gated_delta_rule
        cfla.uninstall()
        assert k.chunk_kimi_delta_attention is not cfla.chunk_kda
        print("ok")
    """)
    assert out.strip().endswith("ok")


FAKE_FLA = {
    "fla/__init__.py": "",
    "fla/ops/__init__.py": "",
    "fla/ops/gated_delta_rule/__init__.py":
        "from .chunk import chunk_gated_delta_rule\nchunk_gdn = chunk_gated_delta_rule\n",
    "fla/ops/gated_delta_rule/chunk.py":
        "def chunk_gated_delta_rule(*args, **kwargs):\n    raise RuntimeError('FLA ran')\n",
    "fla/ops/kda/__init__.py":
        "def chunk_kda(*args, **kwargs):\n    raise RuntimeError('FLA ran')\n",
    "user_model.py": "from fla.ops.gated_delta_rule import chunk_gated_delta_rule as gdn\n",
}


def test_fla_callers_get_the_drop_in(tmp_path):
    for name, text in FAKE_FLA.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = run_python("""
        import user_model                      # imported FLA's function before install()
        import cudnn.linear_attention.fla as cfla
        cfla.install()
        import fla.ops.gated_delta_rule as gdr
        assert user_model.gdn is cfla.chunk_gated_delta_rule
        assert gdr.chunk_gated_delta_rule is gdr.chunk_gdn is cfla.chunk_gated_delta_rule
        from fla.ops.kda import chunk_kda     # imported after install()
        assert chunk_kda is cfla.chunk_kda
        cfla.uninstall()
        assert user_model.gdn is not cfla.chunk_gated_delta_rule
        print("ok")
    """, extra_path=str(tmp_path))
    assert out.strip().endswith("ok")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
