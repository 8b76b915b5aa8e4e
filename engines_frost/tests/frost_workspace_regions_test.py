"""kernels/workspace_regions.py, the one layout rule and carve of the FROST backward's and
the span summaries' scratch: regions in order on 256-byte boundaries, sizes by dtype (raw
uint8 regions by their byte count), views that alias the workspace at each offset and
never overlap; and both launchers' layouts built through it keep their sizes."""
import pytest

torch = pytest.importorskip("torch")


def test_pack_aligns_in_order_and_sizes_by_dtype():
    from cudnn.linear_attention.frost.kernels.workspace_regions import ALIGN, pack

    regions, total = pack([("a", (3, 5), "bfloat16"), ("raw", (1000,), "uint8"), ("b", (7,), "float32"),
                           ("c", (2, 2), "float16")])
    assert [r.name for r in regions] == ["a", "raw", "b", "c"]
    assert [r.nbytes for r in regions] == [30, 1000, 28, 8]
    offsets = [r.offset for r in regions]
    assert offsets == [0, ALIGN, ALIGN + 4 * ALIGN, 6 * ALIGN] and total == 7 * ALIGN
    assert pack([]) == ((), 0)


def test_carve_views_alias_the_workspace_without_overlap():
    from cudnn.linear_attention.frost.kernels.workspace_regions import carve, pack

    regions, total = pack([("s", (4, 3), "float32"), ("raw", (300,), "uint8"), ("h", (5, 2), "bfloat16")])
    ws = torch.zeros(total + 64, dtype=torch.uint8)[64:]  # a base off the allocation's
    views = carve(ws, regions)
    assert (views["s"].shape, views["s"].dtype) == ((4, 3), torch.float32)
    assert (views["raw"].shape, views["raw"].dtype) == ((300,), torch.uint8)
    assert (views["h"].shape, views["h"].dtype) == ((5, 2), torch.bfloat16)
    for r in regions:
        assert views[r.name].data_ptr() == ws.data_ptr() + r.offset, r.name
    views["s"].fill_(1.0)
    views["raw"].fill_(7)
    views["h"].fill_(-2.0)
    assert float(views["s"].sum()) == 12.0 and int(views["raw"].sum()) == 2100
    assert float(views["h"].float().sum()) == -20.0  # no write ran into another region


def test_launcher_layouts_keep_their_sizes():
    """The backward's workspace and the summary's (which nests it as raw bytes) through the
    shared rule: every region fits inside the reported total and the regions are disjoint."""
    from cudnn.linear_attention.frost.kernels import bwd, summary

    layouts = [bwd.workspace_layout(total_tokens=130, num_seqs=3, heads_q=2, heads_k=2, heads_v=4,
                                    head_dim_k=64, head_dim_v=64)]
    shape = summary.SummaryShape(T=130, N=3, H_or_HV=4, HK=2, HO=4, K=64, V=64, io="bfloat16", state="float32",
                                 beta="bfloat16", transition="float32", backward=True, gate_per_channel=True,
                                 beta_per_channel=False, no_output=True)
    layouts.append(summary.summary_workspace_layout(shape))
    for regions, total in layouts:
        ends = 0
        for r in regions:
            assert r.offset >= ends and r.offset % 256 == 0, (r, ends)
            ends = r.offset + r.nbytes
        assert ends <= total
    chain = {r.name: r for r in layouts[1][0]}["chain"]
    assert chain.dtype == "uint8" and chain.nbytes == bwd.frost_bwd_workspace_size(
        total_tokens=130, num_seqs=3, heads_q=4, heads_k=2, heads_v=shape.stand_in, head_dim_k=64, head_dim_v=64)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
