"""Float64 references for the linear-attention ops (test-only; not shipped).

Recurrent ground truth: gdn.naive_recurrent_gdn, kda.naive_recurrent_kda,
gdn2.naive_recurrent_gdn2 (+ *_bwd by autograd). Chunked algebra the GPU kernels follow:
gdn.naive_chunk_gdn, kda.naive_chunk_kda (+ explicit *_bwd), stages in chunk_fwd.py and
chunk_bwd.py. Inputs for tests: inputs.make_inputs; family-generic calls: families.
"""
