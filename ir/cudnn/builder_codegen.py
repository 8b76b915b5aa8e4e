"""Generates the checked-in `builders_*.py` modules from the OpSpecs.

Each OpSpec becomes one method with an explicit signature taken from its CallStyle:
leading required ports have no default, every later port defaults to None, attrs to
their `signature_default`, `name` to "", `compute_data_type` / `out_dims` to None; a
final `**unexpected` lets `_add_op` report an unknown keyword with the accepted names.

    PYTHONPATH=ops:ir python ir/cudnn/builder_codegen.py --write   # regenerate
    PYTHONPATH=ops:ir python ir/cudnn/builder_codegen.py --check   # exit 1 if stale
A test asserts the checked-in files equal `render()` output.
"""
from __future__ import annotations

import argparse
import pkgutil
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__" and "cudnn" not in sys.modules:
    # Run as a script: import the OpSpecs without running cudnn/__init__.py, which
    # imports the generated modules (they may be missing or stale, which is why we run).
    _stub = types.ModuleType("cudnn")
    _stub.__path__ = pkgutil.extend_path([], "cudnn")
    sys.modules["cudnn"] = _stub

from cudnn.ops import (block_scale, conv, linear_attention, matmul, moe, norm, pointwise,
                       reduction, sdpa, structural)
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, OpGroup, OpSpec, PortKind,
                               PortSpec, ReturnStyle)
from cudnn.ops.registry import all_specs


@dataclass(frozen=True)
class GeneratedModule:
    filename: str
    class_name: str
    groups: tuple[OpGroup, ...]
    spec_modules: tuple[types.ModuleType, ...]
    title: str


MODULES: tuple[GeneratedModule, ...] = (
    GeneratedModule("builders_pointwise.py", "PointwiseBuilders",
                    (OpGroup.POINTWISE, OpGroup.MATMUL), (pointwise, matmul),
                    "pointwise ops and matmul"),
    GeneratedModule("builders_structured.py", "StructuredBuilders",
                    (OpGroup.NORM, OpGroup.REDUCTION, OpGroup.BLOCK_SCALE, OpGroup.MOE,
                     OpGroup.CONV, OpGroup.STRUCTURAL),
                    (norm, reduction, block_scale, moe, conv, structural),
                    "norms, reduction, block scale, MoE, convolution and structural ops"),
    GeneratedModule("builders_linear_attention.py", "LinearAttentionBuilders",
                    (OpGroup.LINEAR_ATTENTION,), (linear_attention,),
                    "linear-attention ops (python-engine-only)"),
    GeneratedModule("builders_sdpa.py", "SdpaBuilders", (OpGroup.SDPA,), (sdpa,),
                    "the captured SDPA variants"),
)

_WIDTH = 100
_KW_DEFAULTS = {BuilderKeyword.NAME.value: ('str', '""'),
                BuilderKeyword.COMPUTE_DATA_TYPE.value: ("DTypeArg", "None"),
                BuilderKeyword.OUT_DIMS.value: ("OutDims", "None")}


def _constant_name(spec: OpSpec, module: types.ModuleType) -> str:
    for key, value in vars(module).items():
        if value is spec and key.isupper():
            return key
    raise LookupError(f"OpSpec {spec.name} is not a module-level constant of {module.__name__}")


def _port_annotation(port: PortSpec) -> str:
    return {PortKind.TENSOR: "TensorArg", PortKind.TENSOR_LIST: "Sequence[TensorArg]",
            PortKind.TENSOR_OR_SCALAR: "float | TensorArg",
            PortKind.MIXED_TUPLE: "tuple[Any, ...]"}[port.kind]


def _attr_annotation(attr: AttrSpec) -> str:
    if attr.kind is AttrKind.ENUM:
        assert attr.enum_type is not None
        return attr.enum_type.__name__
    return {AttrKind.BOOL: "bool", AttrKind.INT: "int", AttrKind.FLOAT: "float",
            AttrKind.STR: "str", AttrKind.INT_LIST: "Sequence[int]",
            AttrKind.SLICE_LIST: "Sequence[slice]", AttrKind.DATA_TYPE: "DTypeArg",
            AttrKind.CALLABLE: "Callable[..., Any]"}[attr.kind]


def _parameters(spec: OpSpec) -> list[str]:
    ports = {p.name: p for p in spec.ports}
    attrs = {a.name: a for a in spec.attrs}
    params, defaults_started = ["self"], False
    for index, name in enumerate(spec.call.names):
        if index == len(spec.call.positional):
            params.append("*")
            defaults_started = True
        if name in _KW_DEFAULTS:
            annotation, default = _KW_DEFAULTS[name]
            params.append(f"{name}: {annotation} = {default}")
            defaults_started = True
            continue
        port, attr = ports.get(name), attrs.get(name)
        required = port.required if port is not None else attr.required  # type: ignore[union-attr]
        annotation = (_port_annotation(port) if port is not None
                      else _attr_annotation(attr))  # type: ignore[arg-type]
        if required and not defaults_started:
            params.append(f"{name}: {annotation}")
            continue
        defaults_started = True
        default = None if port is not None else attr.signature_default  # type: ignore[union-attr]
        if annotation == "DTypeArg" or default is not None:
            params.append(f"{name}: {annotation} = {default!r}")
        else:
            params.append(f"{name}: {annotation} | None = None")
    params.append("**unexpected: Any")
    return params


def _wrap(head: str, items: list[str], tail: str, indent: str) -> list[str]:
    lines, current = [], head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else tail)
        if len(current) + len(piece) + 1 > _WIDTH and current.strip() not in ("", head.strip()):
            lines.append(current.rstrip())
            current = indent
        current += piece if current.endswith(("(", " ")) else " " + piece
    lines.append(current)
    return lines


def _method(spec: OpSpec, module: types.ModuleType) -> list[str]:
    const = _constant_name(spec, module)
    alias = "_" + module.__name__.rsplit(".", 1)[1]
    returns = "Tensor" if spec.returns is ReturnStyle.SINGLE else "list[Tensor | None]"
    outs = ", ".join(o.name + ("?" if o.present is not None else "") for o in spec.outputs)
    lines = _wrap(f"    def {spec.name}(", _parameters(spec), f") -> {returns}:", " " * 12)
    lines.append(f'        """{spec.summary}.')
    lines.append("")
    lines += textwrap.wrap(f"Outputs: {outs}; spec {alias[1:]}.{const}.", width=_WIDTH,
                           initial_indent=" " * 8, subsequent_indent=" " * 8)
    lines.append('        """')
    lines.append(f"        return self._add_op({alias}.{const}, locals())")
    return lines


def render(module: GeneratedModule) -> str:
    specs = [s for s in all_specs().values() if s.group in module.groups]
    enums = sorted({a.enum_type.__name__ for s in specs for a in s.attrs
                    if a.enum_type is not None})
    out = [
        f'"""Builder methods of {module.title}.',
        "",
        "GENERATED by cudnn.builder_codegen from the OpSpecs: do not edit; regenerate with",
        "`PYTHONPATH=ops:ir python ir/cudnn/builder_codegen.py --write`.",
        '"""',
        "from __future__ import annotations",
        "",
        "from collections.abc import Callable, Sequence  # noqa: F401",
        "from typing import Any",
        "",
        "from cudnn.builder_base import BuilderBase, DTypeArg, OutDims, TensorArg  # noqa: F401",
        "from cudnn.graph_types import Tensor",
    ]
    out += [f"from cudnn.ops import {m.__name__.rsplit('.', 1)[1]} as "
            f"_{m.__name__.rsplit('.', 1)[1]}" for m in module.spec_modules]
    out += [f"from cudnn.ops.enums import {name}  # noqa: F401" for name in enums]
    out += ["", "", f"class {module.class_name}(BuilderBase):", "    __slots__ = ()"]
    by_module = {id(s): m for m in module.spec_modules for s in getattr(m, "SPECS", ())}
    for spec in specs:
        out.append("")
        out += _method(spec, by_module[id(spec)])
    return "\n".join(out) + "\n"


def _target_dir() -> Path:
    return Path(__file__).resolve().parent


def stale_modules() -> list[str]:
    stale = []
    for module in MODULES:
        path = _target_dir() / module.filename
        if not path.exists() or path.read_text() != render(module):
            stale.append(module.filename)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated modules")
    parser.add_argument("--check", action="store_true", help="exit 1 if any module is stale")
    args = parser.parse_args(argv)
    if args.write:
        for module in MODULES:
            (_target_dir() / module.filename).write_text(render(module))
        return 0
    stale = stale_modules()
    for name in stale:
        print(f"stale: {name}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
