"""The operands of one frost_bwd call as CPU tensors, for the backward's host-side tests
(frost_bwd_args_test, frost_bwd_experiments_test, frost_bwd_recompute_forward_test): q, k,
v, g, beta (w for GDN-2), cu_seqlens, dO, the optional initial state and d_final_state,
and result buffers shaped as frost_bwd expects them (io: the 16-bit dtype of q, k, v, dO
and GDN-2's beta and w); and the checked config of such a call."""
import torch


def bwd_operands(T=130, N=3, H=4, HK=4, HV=4, K=64, V=64, family="gdn", h0=False, dht=False, io="bfloat16"):
    bf = getattr(torch, io)
    HO = max(H, HV)
    vec = family != "gdn"
    x = dict(q=torch.randn(T, H, K, dtype=bf), k=torch.randn(T, HK, K, dtype=bf), v=torch.randn(T, HV, V, dtype=bf),
             g=torch.randn(T, HO, K) if vec else torch.randn(T, HO),
             beta=torch.rand(T, HO, K, dtype=bf) if family == "gdn2" else torch.rand(T, HO),
             w=torch.rand(T, HO, V, dtype=bf) if family == "gdn2" else None,
             cu_seqlens=torch.tensor([0, 50, 50, T][:N] + [T], dtype=torch.int32)[: N + 1],
             dO=torch.randn(T, HO, V, dtype=bf),
             initial_state=torch.randn(N, HO, V, K) if h0 else None,
             d_final_state=torch.randn(N, HO, V, K) if dht else None)
    x.update(dq=torch.empty_like(x["q"]), dk=torch.empty_like(x["k"]), dv=torch.empty_like(x["v"]),
             dg=torch.empty_like(x["g"]), dbeta=torch.empty_like(x["beta"]),
             dw=None if x["w"] is None else torch.empty_like(x["w"]),
             d_initial_state=torch.empty(N, HO, V, K) if h0 else None)
    return x


def checked_config(x, family="gdn", l2=False):
    """frost_bwd's checks of operands x (bwd_operands') for `family`: (config, T, N)."""
    from cudnn.linear_attention.frost.kernels.bwd import check_bwd_operands

    return check_bwd_operands(**x, use_l2norm=l2, gate_per_channel=family != "gdn",
                              beta_per_channel=family == "gdn2")
