"""The op schema: registry contents, enum binding values, OpSpec and AttrSpec rules."""
import enum
import math
import random

import pytest

from cudnn.ops import enums
from cudnn.ops.data_types import data_type, to_data_type
from cudnn.ops.errors import OpTypeError, OpValueError
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, CallStyle, OpCall, OpGroup, OpSpec,
                               OutputSpec, PortSpec, PortView, ReturnStyle)
from cudnn.ops.registry import all_specs, counts_by_group


# Binding parameter counts per SDPA variant (positionals + keywords + name +
# compute_data_type), and the python-only additions: the keyword lists of the frontend
# binding that ops/cudnn/ops/sdpa.py (`_KWARGS`) restates (docs/GRAPH_IR.md §1).
SDPA_BINDING_PARAMS = {"sdpa": (36, 3), "sdpa_backward": (30, 2), "sdpa_fp8": (41, 3),
                       "sdpa_fp8_backward": (35, 2), "sdpa_mxfp8": (28, 4),
                       "sdpa_mxfp8_backward": (34, 2)}


@pytest.mark.parametrize("variant", SDPA_BINDING_PARAMS)
def test_sdpa_keyword_matrix_counts(variant):
    spec = all_specs()[variant]
    python_only = [p.name for p in spec.ports if p.python_only] + \
        [a.name for a in spec.attrs if a.python_only]
    binding, extra = SDPA_BINDING_PARAMS[variant]
    assert len(python_only) == extra
    assert len(spec.call.names) - len(python_only) - 1 == binding  # - out_dims


def test_registry_groups_and_names():
    specs = all_specs()
    assert all(name == spec.name for name, spec in specs.items())
    counts = counts_by_group()
    assert counts[OpGroup.POINTWISE] == 54
    assert counts[OpGroup.LINEAR_ATTENTION] == 20
    assert counts[OpGroup.MATMUL] == 1
    assert counts[OpGroup.NORM] == 12 and counts[OpGroup.SDPA] == 6
    assert counts[OpGroup.CONV] == 3 and counts[OpGroup.STRUCTURAL] == 6
    assert len(specs) == 107
    assert sum(counts.values()) == len(specs)
    assert all(isinstance(spec.group, str) for spec in specs.values())


def test_every_spec_is_consistent():
    for spec in all_specs().values():
        ports = {p.name for p in spec.ports}
        for out in spec.outputs:
            assert out.dtype_like is None or out.dtype_like in ports, spec.name
        assert spec.python_only == (spec.backend_method is None), spec.name
        assert isinstance(spec.node_type, NodeType)


# Values of the C++ binding (docs/GRAPH_IR.md §3): lowering passes them through.
BINDING_VALUES = {
    data_type: {"NOT_SET": 0, "FLOAT": 1, "HALF": 3, "BFLOAT16": 10, "INT64": 11,
                "BOOLEAN": 12, "FP8_E4M3": 14, "FP8_E8M0": 17, "FP4_E2M1": 19, "INT4": 20},
    enums.heur_mode: {"A": 0, "B": 1, "FALLBACK": 2, "OPENSOURCE": 3},
    enums.norm_forward_phase: {"NOT_SET": 0, "INFERENCE": 1, "TRAINING": 2},
    enums.reduction_mode: {"ADD": 1, "AMAX": 5, "MUL_NO_ZEROS": 9},
    enums.reshape_mode: {"VIEW_ONLY": 1, "LOGICAL": 2},
    enums.convolution_mode: {"CONVOLUTION": 1, "CROSS_CORRELATION": 2},
    enums.moe_grouped_matmul_mode: {"NONE": 1, "GATHER": 2, "SCATTER": 3, "COMBINE": 4},
    enums.diagonal_alignment: {"TOP_LEFT": 0, "BOTTOM_RIGHT": 1},
    enums.attention_implementation: {"AUTO": 0, "COMPOSITE": 1, "UNIFIED": 2},
    enums.tensor_reordering: {"NONE": 0, "INT8x32": 1, "F16x16": 2, "F8_128x4": 3},
    enums.scalar_type: {"RUNTIME_PARAM": 0, "COMPILE_TIME_CONST": 1},
    enums.build_plan_policy: {"HEURISTICS_CHOICE": 0, "ALL": 1},
    enums.behavior_note: {"RUNTIME_COMPILATION": 1, "CUBLASLT_DEPENDENCY": 5},
    enums.numerical_note: {"TENSOR_CORE": 1, "STRICT_NAN_PROP": 10},
    enums.cuda_graph_retention: {"PER_GRAPH": 0, "NONE": 1},
    enums.knob_type: {"NOT_SET": 0, "TILE_CGA": 32, "SCHED_POLICY": 1000, "WARPS_N": 1009},
}


@pytest.mark.parametrize("enum_type", BINDING_VALUES, ids=lambda e: e.__name__)
def test_enum_binding_values(enum_type):
    for name, value in BINDING_VALUES[enum_type].items():
        assert enum_type[name].value == value, name


def test_node_type_has_56_members():
    assert len(NodeType) == 56 and NodeType.COMPOSITE.value == 1


def test_to_data_type_normalises():
    np = pytest.importorskip("numpy")
    assert to_data_type(None) is None and to_data_type(data_type.NOT_SET) is None
    assert to_data_type(np.dtype("float16")) is data_type.HALF
    assert to_data_type(np.int32) is data_type.INT32
    with pytest.raises(TypeError, match="complex64"):
        to_data_type(np.dtype("complex64"))
    with pytest.raises(TypeError):
        to_data_type(3)


def test_to_data_type_accepts_torch_dtypes():
    torch = pytest.importorskip("torch", exc_type=ImportError)
    assert to_data_type(torch.bfloat16) is data_type.BFLOAT16
    assert to_data_type(torch.bool) is data_type.BOOLEAN
    with pytest.raises(TypeError, match="complex"):
        to_data_type(torch.complex64)


class _Color(enum.Enum):
    RED = 1


@pytest.mark.parametrize("attr,value,error", [
    (AttrSpec("x", AttrKind.BOOL), 1, OpTypeError),
    (AttrSpec("x", AttrKind.INT), True, OpTypeError),
    (AttrSpec("x", AttrKind.INT, minimum=0), -1, OpValueError),
    (AttrSpec("x", AttrKind.FLOAT), "1.0", OpTypeError),
    (AttrSpec("x", AttrKind.STR, choices=("a", "b")), "c", OpValueError),
    (AttrSpec("x", AttrKind.ENUM, enum_type=_Color), 1, OpTypeError),
    (AttrSpec("x", AttrKind.INT_LIST), [1, "2"], OpTypeError),
    (AttrSpec("x", AttrKind.SLICE_LIST), [1], OpTypeError),
    (AttrSpec("x", AttrKind.CALLABLE), 3, OpTypeError),
])
def test_attr_normalize_rejects(attr, value, error):
    with pytest.raises(error) as err:
        attr.normalize("op", value)
    assert err.value.op == "op" and err.value.argument == "x"


def test_attr_normalize_converts():
    assert AttrSpec("x", AttrKind.FLOAT).normalize("op", 2) == 2.0
    assert AttrSpec("x", AttrKind.INT_LIST).normalize("op", [1, 2]) == (1, 2)
    assert AttrSpec("x", AttrKind.FLOAT).normalize("op", math.inf) == math.inf


def _spec(**overrides):
    fields = dict(name="t", group=OpGroup.POINTWISE, node_type=NodeType.POINTWISE,
                  ports=(PortSpec("a", required=True),), attrs=(),
                  outputs=(OutputSpec("OUT_0"),), call=CallStyle(("a",), ("name",)),
                  returns=ReturnStyle.SINGLE, backend_method="t")
    fields.update(overrides)
    return OpSpec(**fields)


def test_opspec_rejects_inconsistent_call_styles():
    _spec()  # the baseline is valid
    with pytest.raises(ValueError, match="misses"):
        _spec(call=CallStyle((), ("name",)))
    with pytest.raises(ValueError, match="unknown"):
        _spec(call=CallStyle(("a", "b")))
    with pytest.raises(ValueError, match="duplicate"):
        _spec(ports=(PortSpec("a"), PortSpec("a")))
    with pytest.raises(ValueError, match="SINGLE"):
        _spec(outputs=(OutputSpec("x"), OutputSpec("y")))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))


_SAMPLE_ATTRS = {AttrKind.FLOAT: (-1.5, 0.0, 2.0), AttrKind.INT: (0, 1, 7),
                 AttrKind.BOOL: (False, True)}


@pytest.mark.parametrize("spec", [s for s in all_specs().values()
                                  if getattr(s.check, "passes_equal_dims", False)],
                         ids=lambda s: s.name)
def test_checks_marked_passes_equal_dims_accept_equal_dims(spec):
    """The IR's one-pass builders skip such a check when all ports have the same dims."""
    rng = random.Random(spec.name)
    for _ in range(20):
        dims = tuple(rng.randint(1, 9) for _ in range(rng.randint(1, 5)))
        dtype = rng.choice([data_type.FLOAT, data_type.HALF, None])
        params = {a.name: rng.choice(_SAMPLE_ATTRS[a.kind]) for a in spec.attrs
                  if a.kind in _SAMPLE_ATTRS and rng.random() < 0.7}
        call = OpCall(spec, {p.name: PortView(dims, dtype) for p in spec.ports}, params)
        spec.check(call)
        for out in spec.outputs:
            if getattr(out.infer, "broadcast_of", None):
                assert tuple(out.infer(call)) == dims
