"""The one check of caller buffers against the graph (port_buffers.py), on CPU tensors:
each contradiction is a ValueError naming the engine, the direction and the port, with
what was found and what the kernels need; nothing else passes."""
import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from cudnn.linear_attention.common.port_buffers import (PACKED, PortBuffer,  # noqa: E402
                                                        check_buffers, checked_tensors)
from cudnn.linear_attention.common.port_dtypes import IO  # noqa: E402
from cudnn.ops.data_types import data_type as D  # noqa: E402

CPU = torch.device("cpu")
T, H, K = 12, 3, 8
PORTS = (PortBuffer("input", "q", (T, H, K), (D.BFLOAT16, D.HALF)),
         PortBuffer("input", "k", (T, H, K), IO),
         PortBuffer("input", "g", (T, H), (D.FLOAT,)),
         PortBuffer("input", "cu_seqlens", (4,), (D.INT32, D.INT64), PACKED),
         PortBuffer("output", "O", (T, H, K), IO, alignment=((2, 16),)))


def good(io=torch.bfloat16):
    return {"q": torch.zeros(T, H, K, dtype=io), "k": torch.zeros(T, H, K, dtype=io),
            "g": torch.zeros(T, H), "cu_seqlens": torch.tensor([0, 3, 7, T]),
            "O": torch.zeros(T, H, K, dtype=io)}


@pytest.mark.parametrize("io", [torch.bfloat16, torch.float16])
def test_matching_buffers_pass_and_unwired_ports_are_skipped(io):
    t = good(io)
    check_buffers("eng", PORTS, t, CPU)
    t["g"] = None
    del t["k"]
    check_buffers("eng", PORTS, t, CPU)
    # outer dims may be strided when the innermost is not
    t["O"] = torch.zeros(T, 2 * H, K, dtype=io)[:, ::2]
    check_buffers("eng", PORTS, t, CPU)


def _offset(t):
    """t's values one element past a 16-byte boundary (same shape and dtype)."""
    raw = torch.zeros(t.numel() + 16, dtype=t.dtype)
    start = (-raw.data_ptr() % 16) // t.element_size() + 1
    return raw[start:start + t.numel()].view(t.shape)


@pytest.mark.parametrize("port, bad, needle", [
    ("q", lambda t: t[:T - 1], "input 'q' has shape [11, 3, 8]; the graph declares [12, 3, 8]"),
    ("q", lambda t: t.float(), "input 'q' has dtype FLOAT; the kernel reads BFLOAT16 or HALF"),
    ("k", lambda t: t.half(), "input 'k' has dtype HALF; the kernel reads BFLOAT16"),
    ("O", lambda t: t.half(), "output 'O' has dtype HALF; the kernel reads BFLOAT16"),
    ("g", lambda t: t.to(torch.complex64), "input 'g' has dtype torch.complex64; the kernel "
                                           "reads FLOAT"),
    ("g", lambda t: torch.zeros(H, T).t(), "input 'g' has innermost stride 12"),
    ("cu_seqlens", lambda t: torch.zeros(8, dtype=t.dtype)[::2],
     "input 'cu_seqlens' has strides [2]; the kernels read packed row-major rows"),
    ("cu_seqlens", lambda t: t.to(torch.int16),
     "input 'cu_seqlens' has dtype torch.int16; the kernel reads INT32 or INT64"),
    ("O", _offset, "output 'O' starts at 0x"),
    ("O", lambda t: t.to("meta"), "output 'O' is on meta; the kernels need CUDA buffers on cpu"),
])
def test_each_contradiction_names_engine_port_found_and_needed(port, bad, needle):
    t = good()
    t[port] = bad(t[port])
    with pytest.raises(ValueError) as err:
        check_buffers("eng", PORTS, t, CPU)
    assert str(err.value).startswith("eng: "), err.value
    assert needle in str(err.value), err.value


def test_a_buffer_on_another_gpu_than_the_plan_names_both():
    class OnGpu0:  # what a CUDA tensor's device says, without a GPU
        device = torch.device("cuda:0")
    with pytest.raises(ValueError, match=r"eng: input 'q' is on cuda:0 but this plan runs on "
                                         r"cuda:1 \(plans are per device"):
        PORTS[0].check("eng", OnGpu0(), torch.device("cuda:1"), None)


def test_checked_tensors_wraps_dlpack_buffers_and_names_a_port_that_is_no_buffer():
    t = good()
    arrays = {**t, "g": np.zeros((T, H), np.float32), "k": None}
    out = checked_tensors("eng", PORTS, lambda p: arrays[p.port], CPU)
    assert isinstance(out["g"], torch.Tensor) and out["k"] is None and out["q"] is t["q"]
    out["g"][0, 0] = 5.0
    assert arrays["g"][0, 0] == 5.0, "a view of the caller's memory, never a copy"
    arrays["O"] = "not a buffer"
    with pytest.raises(TypeError, match="'O': expected a torch tensor or a DLPack"):
        checked_tensors("eng", PORTS, lambda p: arrays[p.port], CPU)
    arrays["O"] = np.zeros((T, H, K), np.float32)
    with pytest.raises(ValueError, match="eng: output 'O' has dtype FLOAT"):
        checked_tensors("eng", PORTS, lambda p: arrays[p.port], CPU)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
