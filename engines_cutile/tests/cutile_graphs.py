"""Single-node GDN / KDA graphs built with the IR, for the cuTile engine tests."""
import cudnn

DT = cudnn.data_type


def la_graph(family="gdn", backward=False, T=100, N=3, H=2, HV=2, K=64, V=64, io=DT.BFLOAT16,
             g_dtype=DT.FLOAT, cu_dtype=DT.INT32, with_h0=False, d_h0=None, kv_heads=None,
             **attrs):
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=DT.FLOAT,
                      compute_data_type=DT.FLOAT)
    HO = max(H, HV)
    gate = [T, HO, K] if family == "kda" else [T, HO]
    t = {
        "q": g.tensor([T, H, K], data_type=io, name="q"),
        "k": g.tensor([T, kv_heads or H, K], data_type=io, name="k"),
        "v": g.tensor([T, HV, V], data_type=io, name="v"),
        "g": g.tensor(gate, data_type=g_dtype, name="g"),
        "beta": g.tensor([T, HO], data_type=DT.FLOAT, name="beta"),
        "cu_seqlens": g.tensor([N + 1], data_type=cu_dtype, name="cu"),
    }
    if with_h0:
        t["initial_state"] = g.tensor([N, HO, V, K], data_type=DT.FLOAT, name="h0")
    if backward:
        t["dO"] = g.tensor([T, HO, V], data_type=io, name="dO")
        outs = getattr(g, f"{family}_bwd")(**t, **attrs)
    else:
        outs = getattr(g, family)(**t, **attrs)
    for o in outs:   # kernel-native output dtypes: io for activations, fp32 otherwise
        if o is not None:
            native = io if o.name.split("::")[-1] in ("O", "dQ", "dK", "dV") else DT.FLOAT
            o.set_output(True).set_data_type(native)
    g.validate()
    return g
