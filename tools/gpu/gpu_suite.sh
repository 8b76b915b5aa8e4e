#!/usr/bin/env bash
# Runs the GPU-only suites on the remote GPU test machine (no network, no Bazel there), one
# log per stage under $OUT. See tools/gpu/README.md for what the machine gets carried.
#
#   tools/gpu/gpu_suite.sh STAGE [STAGE...]  (from the repository root, on the GPU machine)
#
# Stages:
#   wheels     add the carried .whl/load*/ (tools/gpu/wheelhouse.sh) to $CUDNN_WHEELS (default
#              /opt/cudnn-wheels, kept while the machine stays up); split wheels are joined
#              once all their parts have arrived
#   install    pip install ".[all]" from $CUDNN_WHEELS and .whl/ (no index, no build
#              isolation: setuptools and pybind11 from the carried wheels and this machine's
#              cuDNN and CUDA headers build the extension), then `python -m cudnn env`
#   product    as a user, outside the checkout and without PYTHONPATH: the README's GPU
#              example (output checked), python -m cudnn explain / precompile / bench
#   setup      install the carried wheels (.whl/*.whl) into /tmp/site (flash-linear-attention
#              and other test-only packages), report the GPU
#   backend    build the C++ extension in place with this machine's compiler (the PEP 517
#              build of setup.py: pip install -e, offline), run tests/backend
#   backendlog rerun backend tests matching $BACKEND_K with cuDNN's error log on stderr
#   moe        MoE grouped matmul modes NONE / GATHER / SCATTER on the backend against float64
#              (tests/backend/test_moe_modes_backend.py), one process per case so that an
#              illegal memory access stays in its case; builds the extension as stage backend
#              does where it is not built yet (stage backend runs these cases too)
#   moememcheck the probe cases $MOE_CASES (default: the GATHER and SCATTER ones) one by one
#              under compute-sanitizer memcheck: which kernel reads or writes out of bounds
#   fla        tests/fla/gpu_test.py: the FLA drop-in (functions, Qwen3-Next / Kimi Linear
#              layers, a tiny Qwen3-Next that trains and generates) against transformers
#   fladiag    tests/fla/greedy_diagnose.py: the greedy generation step by step (router
#              choices, each GDN call's lane/plan and o / state errors vs float64), on the
#              2-expert LM and then on the dense LM gpu_test.py uses
#   torchops   tests/torch_ops/ops_gpu_test.py and the cached-call overhead (op_overhead.py)
#   cutile     the cuTile engine matrix (tests/numerics/test_la_cutile_engines.py)
#   smoke      cuTile kernel smoke checks: KDA/GDN forward and backward vs float64
#   frost      frostsmoke then frostmatrix (both need the CuTe DSL: stage install):
#   frostsmoke FROST kernels vs float64 + timing (FROST_SMOKE_ARGS, e.g. "--algorithm all": oracle,
#              mma, pipelined, wgmma forced by the test tooling; wgmma is the product's for these bf16 cases)
#   frostmatrix the FROST engine matrix through the graph API (FROST_MATRIX_ARGS, e.g.
#              "--frost-fwd-kernel wgmma": the forward on another kernel layer of the tooling)
#   frostwgmma forward wgmma (pipelined with the chain's state products on warpgroup MMA): its kernels
#              precompiled on this machine's cores into .frostcache (stage frostwgmmabuild: the
#              smoke's pipelined and wgmma kernels, the wgmma layer's stage-time variants and engine matrix; ~1-2 min
#              on 16 cores), then the smoke with pipelined and wgmma side by side (frostwgmmasmoke: every
#              case vs float64, SUMMARY lines wgmma/pipelined on kernel times), the stage times of wgmma
#              (frostwgmmastages), of wgmma GDN with l2norm and of pipelined GDN without and with it
#              (frostwgmmal2, also a suite of its own: ~2 min, the pipelined layer's variants compile there) and
#              the engine matrix through wgmma (frostwgmmamatrix, pytest --frost-fwd-kernel wgmma:
#              engines_frost/tests/frost_fwd_experiments.py; training forwards stay on the
#              product's kernel, wgmma too for bf16)
#   frostwgmmal2 bench/frost_stage_times.py for GDN: wgmma with l2norm, pipelined without and with it
#              (wgmma without it is frostwgmmastages); what the q/k norms add per stage
#   gramwgmma  forward wgmma with the GDN Gram on warpgroup MMA (fwd_wgmma_gram.py, off by default:
#              FROST_FWD_GRAM=wgmma|wgmma16|wgmma64 / la_frost_smoke's wgmmagram*): gramwgmmasmoke
#              (GDN cases vs float64, wgmma and the three widths side by side, "wgmmagram vs wgmma"
#              lines), gramwgmmatrain (GDN
#              training forwards through it, backward smoke), gramwgmmastages (wgmma GDN l2norm
#              stage times, Gram on mma.sync then each width), gramwgmmabench (GDN fwd,
#              switch off then each width); kernels compiled on first use
#   scaled     forward wgmma with GDN's decays as per-token factors and no operand stage
#              (fwd_wgmma_scaled.py, the product's; FROST_FWD_DECAY=folded / la_frost_smoke's
#              wgmma: the folded chain, the A/B; =scaled-lead / wgmmascaledlead: the next chunk's
#              rows copied a chunk ahead too; =scaled-ws / wgmmascaledws: warp-specialised,
#              fwd_ws.py; FROST_FWD_WS_REGS=consumer,producer its setmaxnreg split, e.g.
#              184,72): scaledsmoke (GDN cases vs float64, wgmma and both side by side,
#              "<name> vs wgmma" lines, kernel times), scaledtrain (GDN training and recompute
#              forwards through each, backward smoke), scaledbench (GDN fwd and fwd+bwd op
#              rows, folded, scaled, scaled-lead, scaled-ws, folded); kernels compiled on
#              first use
#   wssplit    the warp-specialised forward (fwd_ws.py) and chain (bwd_chain_ws.py) at each
#              setmaxnreg split of WS_SPLITS (default "208,48 200,56 184,72"; consumer,producer):
#              wssplitfwd (the forwards precompiled side by side, then GDN fwd rows, kernel
#              and op: the product, ws at its own 216 / 40, each split, the product again),
#              wssplitbwd (the backward smoke's "mixed" case vs float64 and its kernel times:
#              the product's chain, ws at 216 / 40, each split); STAGE_TIMEOUT=600 for both
#   wy         the warp-specialised GDN forward with the full inverse on the producer
#              (fwd_ws_wy.py, FROST_FWD_DECAY=wy-ws / la_frost_smoke's wgmmawyws; without W',
#              the chain applying the inverse: wyc-ws / wgmmawycws; splits 192,64 / 208,48 unless
#              FROST_FWD_WS_REGS): wysmoke (GDN cases vs float64, the scaled product,
#              scaled-ws, wy-ws and wyc-ws, the last two also with the m64n64 wgmma Gram in
#              their producer, side by side, kernel times; WY_SMOKE names them), wytrain (GDN training
#              and recompute forwards through each, backward smoke; then the backward chain
#              without its back substitution, FROST_BWD_CHAIN=wgmma_wy, bwd_chain_ws_wy.py:
#              smoke vs float64 and chain kernel times), wybench (GDN fwd and fwd+bwd op rows:
#              product, wy-ws, wyc-ws, wy-ws at 208,48, the wgmma_wy chain, both wy, product);
#              wysmoke and wybench compile each variant in its own process first (one per
#              core), then run in turn on the warm kernel store; STAGE_TIMEOUT=600; the
#              four-role forwards (fwd_ws4.py) by WY_SMOKE="wgmmascaled wgmmawycws4raw"
#              (wgmmawyws4, wgmmawyws4raw: the earlier ones)
#   fourroles  GDN's four-role forward (fwd_ws4.py; the product's for sequences of >= 512 tokens on
#              average): fourrolessmoke (FR_SMOKE, default wgmmascaled wgmmawycws4raw: vs
#              float64 and kernel times), fourrolesmatrix (the GDN engine matrix, no knob: the
#              product path), fourrolesgate (GDN fwd rows at 1 to 64 chunks per sequence with
#              FROST_FWD_DECAY=scaled / wyc-ws4raw: where the 512-token gate should sit)
#   bwdfour    the backward's wy chain in four roles (bwd_chain_ws4.py: FROST_BWD_CHAIN=wgmma_ws4,
#              =wgmma_ws4c without W', =wgmma_ws4raw / wgmma_ws4rawc on raw rows in a ring;
#              BWD_FOUR names them, default all four): bwdfoursmoke (GDN backward smoke vs
#              float64 with each, every case; then the mixed case's chain kernel times, the
#              product's chain and each in turn), bwdfourbench (GDN fwd+bwd op rows, the
#              product and each, twice)
#   wysplit    wy-ws / wyc-ws GDN forward kernel rows at each setmaxnreg split and Gram (WY_SPLITS,
#              decay:consumer,producer[:gram], FROST_FWD_GRAM's values; compiled side by side
#              first), the product before and after; the four-role decays take a
#              chain,math,copies triple (WY_SPLITS="wy-ws4raw:192,104,24 wyc-ws4raw:208,72,24")
#   bwdscaled  the backward's scaled-decay chain (bwd_chain_scaled.py, FROST_BWD_CHAIN=
#              wgmma_scaled, the default) and its warp-specialised form (bwd_chain_ws.py, =wgmma_ws;
#              FROST_BWD_WS_REGS=consumer,producer its setmaxnreg split):
#              bwdscaledsmoke (GDN backward smoke vs float64 with each), bwdscaledbench (GDN
#              fwd+bwd op rows: default, folded (wgmma_async chain and folded forwards, the A/B), ws, ws with every forward on fwd_ws.py
#              (FROST_FWD_DECAY=scaled-ws), default)
#   summary    their kernels precompiled on this machine's cores into FROST_KERNEL_CACHE (default
#              .frostcache; tests/numerics/frost_summary_prebuild.py), then the FROST summary
#              engines vs float64 (tests/numerics/test_la_frost_summary_engines.py),
#              then context parallelism with worlds 2 and 4 in one process on one GPU
#              (tests/context_parallel/cp_in_process_gpu_test.py), then over NCCL, one rank
#              per GPU (cp_nccl_gpu_test.py: world 2 on 2 GPUs, world 4 on 4; skipped with
#              fewer), then cpbench
#   cpbench    bench/context_parallel_bench.py: one sequence of 2 x 32k tokens over two
#              GPUs against one GPU (tokens/s, communication share); skipped with one GPU;
#              CP_BENCH_ARGS adds arguments (e.g. "--world 4 --family kda")
#   frostbwd   the FROST backward: kernel smoke vs float64 with determinism and timing
#              (tests/numerics/la_frost_bwd_smoke.py; its kernels are precompiled first on
#              this machine's cores, or loaded from a carried store: build one on the build
#              host with `FROST_FFI=cute python3 tests/numerics/la_frost_bwd_smoke.py --prebuild
#              --matrix` and run with FROST_FFI=cute), then the backward engine matrix
#              (tests/numerics/test_la_frost_bwd_engines.py). Both also run the training paths
#              (forward-written state checkpoints read by the backward, v1.2; and with the
#              forward's U as well, chain + grads only, v1.3: cases [ckpt+U], timings
#              fwd[ckpt+U] / bwd[U] / fwd+bwd[U], test_backward_from_forward_values): about
#              350 kernels in all, so compiling them here wants STAGE_TIMEOUT=1800;
#              --no-checkpoints in FROST_BWD_SMOKE_ARGS skips both paths in the smoke,
#              --no-values only the v1.3 one
#   census     bench/op_kernel_census.py: the kernels one public-op call launches (fwd+bwd, then
#              fwd), device us each: what the op adds around the FROST kernels
#   nosync     tests/torch_ops/no_host_sync_gpu_test.py: a warm fwd+bwd of every family returns
#              while a queued sleep kernel still runs (no host synchronisation), bitwise
#   bwdmatrix  the backward engine matrix alone, one pytest process per family side by side
#              (tools/gpu/matrix_families.sh, logs bwdmatrix_<family>.log; BWD_MATRIX_FAMILIES
#              picks families): about a third of one process's time; with a carried store
#              (stage frostcache first, FROST_FFI=cute) nothing compiles here
#   fwdmatrix  the forward engine matrix the same way (MATRIX=fwd: logs fwdmatrix_<family>.log,
#              the tests that name no family in fwdmatrix_other.log; FWD_MATRIX_FAMILIES);
#              frost_precompile.py --suites frostmatrix --keep adds its kernels to the store
#   treeab     this checkout against the tree(s) in AB_TREE (other commits' files, space-
#              separated: mkdir .base && git archive REV | tar -x -C .base on the build host;
#              TREE::VAR=VALUE adds settings, .::VAR=VALUE is this checkout with them),
#              alternating A B (C ...) for AB_ROUNDS rounds (default 2): the backward smoke's
#              kernel times and the bench's op rows (tools/gpu/tree_ab.sh: AB_SMOKE_FAMILIES,
#              AB_CASES, AB_IMPL, AB_REPS; AB_CHECK=1 checks every tree against float64 first)
#   bwdab      A/B of the vector-gate backward's switches (both now on by default; the
#              previous kernels are FROST_BWD_VEC_DECAY=0, FROST_BWD_CHAIN_VEC=serial): =1 against
#              float64 (KDA, GDN-2; stage bwdabdecay), then the KDA and GDN-2 op rows for
#              FROST_BWD_VEC_DECAY x FROST_BWD_CHAIN_VEC (stage bwdabbench, FROST columns)
#   chainvec   the vector-gate chain on warpgroup MMA (FROST_BWD_CHAIN_VEC=wgmma, the
#              default; NOTES_bwd.md "Vector-gate chain on warpgroup MMA"): KDA and GDN-2
#              smoke vs float64 and vs the serial chain ([chains wgmma] lines, TIME
#              bwd[chain] and bwd[chain, serial]), then the KDA fwd+bwd op rows both ways;
#              chainvecsmoke / chainvecbench run one of them
#   chainasync the wgmma chain with its dS update group in flight under the next chunk's
#              rows (GDN: and Gram) stage (FROST_BWD_CHAIN=wgmma_async, FROST_BWD_CHAIN_VEC=
#              wgmma_async, off by default; NOTES_bwd.md v1.10): GDN, KDA and GDN-2 smoke vs
#              float64 and bitwise vs the synchronous wgmma chain ([chains wgmma_async] lines,
#              TIME bwd[chain] and bwd[chain, wgmma]), then the GDN and KDA fwd+bwd op rows
#              (FROST columns) wgmma vs wgmma_async; chainasyncsmoke / chainasyncbench run one
#   gradsvec   the vector-gate grads kernel's state products on warpgroup MMA
#              (FROST_BWD_GRADS_VEC=wgmma, off by default; NOTES_bwd.md "Vector-gate grads:
#              state products on warpgroup MMA"): KDA and GDN-2 smoke vs float64 and vs the
#              mma.sync grads ([grads wgmma] lines, bitwise= expected True; TIME bwd[grads]
#              and bwd[grads, mma]), the same with FROST_BWD_VEC_WIDE=0 FROST_BWD_VEC_DECAY=0
#              (the other load and decay paths under the new products; no timing), then the
#              KDA and GDN-2 fwd+bwd op rows both ways (FROST columns); gradsvecsmoke /
#              gradsveccombo / gradsvecbench run one of them
#   spansplit  the span-split forward (torch_ops/.../ops/_span_split.py: long sequences on
#              few heads as spans side by side): tests/torch_ops/span_split_gpu_test.py vs
#              float64 (forward, and the backward with CUDNN_LA_SPAN_BACKWARD=1), then the
#              1 x 32768 forward rows with the split off (CUDNN_LA_SPAN_TOKENS=0) and on (the
#              automatic rule), and the fwd+bwd op rows with the backward split off and on;
#              spansplittest / spansplitbench run one of them
#   spansplitshapes where the automatic rule might reach next: 2 x 16384, 4 x 8192 and
#              1 x 16384 tokens, 16 heads, forward and fwd+bwd op rows (GDN, KDA) with spans
#              of 4096 forced (CUDNN_LA_SPAN_TOKENS=4096) against the split off (=0)
#   spansplitprofile the split's components at 1 x 32768 (bench/span_split_profile.py: span
#              table, summary, composition, forward over spans, backward summary, leaving
#              gradients, backward over spans; GPU back-to-back and host time of each;
#              first the host-device syncs of one split call, --sync-check)
#   spansplitlane the same test and profile (GDN, KDA) with CUDNN_FROST_SUMMARY_LANE=1: the
#              FROST summaries' direct launches (summary_engine.py), the default since then
#   bwdlane    the FROST backward plan's direct launch (CUDNN_FROST_BWD_LANE, the default since;
#              engines_frost/.../frost/bwd_plan.py): ops_gpu_test's backward lane test (GDN,
#              KDA, GDN-2 with grouped heads, recompute and training checkpoints: later calls
#              take the lane, gradients bitwise the lane-off path's and within the float64
#              bound), the cached backward call's host time lane off / on (op_overhead.py
#              --backward), then the fwd+bwd op rows (op FROST columns) with the switch 0 and 1;
#              bwdlanetest / bwdlanebench run one of them
#   bwdrecompute the FROST backward's recompute path with its states stage on the output-free
#              training forward (the product's, kernels/bwd.py recompute_configs; the
#              tooling's FROST_BWD_RECOMPUTE_FORWARD=0 puts it back on the states kernel;
#              NOTES_bwd.md "The recompute path's states on the forward kernel"):
#              ops_gpu_test's gradients vs float64 and the FROST backward cases of the
#              cu_seqlens safety tests and the span split's training gradients, then the
#              fwd+bwd op rows with the switch 0 and 1 (the recompute rows move; the
#              checkpoint rows must not);
#              bwdrecomputetest / bwdrecomputebench run one of them
#   tmaprobe   the TMA rows probe (engines_frost/tests/frost_tma_rows_probe.py: 64-row boxes
#              into the forward's SW128 operand tile, the descriptor encoded per call):
#              frost_tma_rows_probe_gpu_test.py (bitwise read-back, zeros past T)
#   fwdbounds  the four-role forward with its math or chain compiled out, at the splits that
#              lift ptxas's serialization, and the backward chain's bounds
#   noloads    the four-role GDN forward's copies: v copied into the raw ring with its chunk's
#              rows (engines_frost/tests/frost_fwd_v_ahead.py, FROST_FWD_DECAY=wyc-ws4va), q / k
#              by tensor-memory copies (frost_fwd_tma_rows.py, wyc-ws4tma) and both with v by
#              bulk copies (wyc-ws4tmava), each checked against float64, then their stage
#              times (full, and with the chain's products or math's Gram and solves compiled
#              out) beside the product's and beside the bound whose copies load only the
#              first chunks (frost_fwd_no_loads.py, wyc-ws4nl)
#   chainprep  the backward chain kernel with its prep stages compiled out
#              (bench/frost_chain_prep_times.py: --skip none, gram, gram+operands; GDN and
#              KDA, one process each; the GPU time of the chain in a CUDA graph):
#              the ceiling of NOTES_bwd.md "Next: the chain without its prep"
#   tmastream  the warp-specialised TMA chunk stream (engines_frost/tests/
#              frost_tma_stream_probe.py: a producer warp fills a ring of SW128 stages through
#              cutlass.pipeline.PipelineTmaAsync, a consumer warpgroup sums rows):
#              frost_tma_stream_probe_gpu_test.py (row sums vs float64 over varlen tables,
#              rows past each sequence untouched), then its --bench (the stream at the bench
#              shape with 2, 3, 4 stages against the byte floor; host time per call)
#   vecrows    the vector-gate grads kernel's v (GDN-2: w) and gate rows copied in its load
#              phase (kernels/NOTES_bwd.md "Vector-gate grads: every row in the load phase"):
#              vecrowstest, the KDA and GDN-2 backward smoke vs float64, then treeab (AB_TREE)
#   chainbulk  the vector-gate chain's next-chunk rows by bulk copies with the dO rows staged
#              in shared memory (the product's; kernels/NOTES_bwd.md "Vector-gate chain: the
#              next chunk's rows by bulk copies"): chainbulktest, the KDA and GDN-2 backward
#              smoke vs float64 with both off (FROST_BWD_CHAIN_BULK=0 FROST_BWD_CHAIN_DO=0);
#              chainbulkbench, tree_ab.sh of this checkout against itself with both off and
#              with the bulk rows alone off (KDA, GDN-2 fwd+bwd op rows)
#   fwdbulk    the vector-gate wgmma forward's next-chunk rows by bulk copies (the product's;
#              kernels/NOTES.md "KDA forward: the next chunk's rows by bulk copies"):
#              fwdbulktest, the KDA and GDN-2 forward smoke (wgmma) vs float64 with the pipelined layer's
#              cp.async instead (FROST_FWD_ROWS=async); fwdbulkbench, tree_ab.sh of this
#              checkout against itself with that (KDA, GDN-2 fwd and fwd+bwd op rows)
#   fwdstores  the vector-gate wgmma forward's O and U rows through per-warp shared buffers (the
#              product's, fwd_wgmma.FrostFwdWgmma.STAGED_STORES; kernels/NOTES.md "KDA forward: the
#              output and U rows as 16-byte stores"): fwdstorestest, the KDA and GDN-2
#              forward smoke (wgmma) vs float64 with 2-byte stores instead
#              (FROST_FWD_STORES=elements); fwdstoresbench, tree_ab.sh of this checkout
#              against itself with that (KDA, GDN-2 fwd and fwd+bwd op rows)
#   gradsprefetch GDN's grads kernel's L2 prefetch of the next item's q and k rows (on by
#              default; FROST_BWD_GRADS_PREFETCH=0 turns it off; kernels/NOTES_bwd.md "The L2
#              prefetch on the H200"): the GDN smoke vs float64 with it off (stage frostbwd
#              runs it on), then the fwd+bwd op rows with the switch 0, 1, 0, 1 (one process
#              each);
#              gradsprefetchtest / gradsprefetchbench run one of them
#   summarynoout the forward span summary on forward kernels compiled without the output
#              (FROST_SUMMARY_NO_OUTPUT, the default since; kernels/NOTES.md "Summary passes
#              without the output"): engines_frost/tests/frost_summary_no_output_gpu_test.py
#              (final states and transitions bitwise the default passes', and vs float64) and
#              the summary op's switch test (span_split_gpu_test.py -k switch), the span split
#              vs float64 with the switch on, then bench/span_split_profile.py for GDN and KDA
#              at 1 x 32768, 16 heads with FROST_SUMMARY_NO_OUTPUT=0 and =1 (the "summary"
#              row: GPU time of the two passes); the new kernels compile on first use, so the
#              stage's own timeout is 900 s unless STAGE_TIMEOUT says otherwise;
#              summarynoouttest / summarynooutbench run one of them
#   wgmmatrain the training forward (state checkpoints + U): A/B of the pipelined layer's training launchers
#              (forced by the test tooling) against the product's, fwd_wgmma's for bf16 on sm_90a
#              (kernels/NOTES.md "v3 training forwards on the H200"): the backward smoke with
#              every forward forced to pipelined (--fwd-kernel pipelined: GDN, KDA, GDN-2 vs float64,
#              [ckpt+U] bitwise the recompute path's; TIME fwd[ckpt+U] and fwd+bwd[U] of pipelined
#              beside the product's [.., product] lines; the product's own [ckpt+U] checks,
#              within FWD_ROUNDING_BOUND with bitwise=, are stage frostbwd's), then the fwd+bwd
#              rows (FROST columns) with --frost-fwd-kernel pipelined and with the product's forward;
#              wgmmatrainsmoke / wgmmatrainbench run one of them
#   gradsvecncu the KDA grads kernel (bench shape) under Nsight Compute with the mma.sync and
#              the wgmma state products (FROST_BWD_GRADS_VEC=mma / wgmma; NOTES_bwd.md
#              "Vector-gate wgmma grads: swizzled copy addresses once per thread"): details of
#              both and one per-SASS CSV each (ncu_gradsvec_{mma,wgmma}_sass.csv) for
#              tools/gpu/ncu_source_report.py
#   autotune   autotune over the FROST and cuTile plans of gdn / kda (forward, backward):
#              the faster plan (timed as the bench times it) wins, and a fresh process
#              reuses the recorded choice (tests/numerics/test_la_autotune_gpu.py)
#   tilecache  unpack .kit/tilecache.tar.xz (carried) into .tilecache: cuTile kernels compiled
#              earlier (on a GPU machine, or ahead of time by cutile_prewarm.py on a
#              build host) are not compiled again; prints the cache's entries and tileiras
#   frostbuild frost_precompile.py on this machine's cores (FROST_BUILD_SUITES; smoke
#              kernels for FROST_BUILD_SMOKE_ALGORITHMS, default wgmma, the product's for the
#              smoke's cases: run frostsmoke with FROST_SMOKE_ARGS="--algorithm wgmma"), into
#              .frostcache, then as frostcache; the packed store comes back in $OUT
#   packcache  report what this machine still JIT-compiled, pack .tilecache into $OUT
#              (copy it to .kit/tilecache.tar.xz here afterwards)
#   frostcache unpack .kit/frostcache.tar.xz (carried; built by frost_precompile.py on the
#              build machine) into .frostcache and set FROST_KERNEL_CACHE for the later stages:
#              FROST kernels load from it instead of compiling (FROST_KERNEL_CACHE_STRICT=1:
#              a kernel missing from it is an error, to prove a run compiled nothing)
#   bench      bench/bench_linear_attention.py (FLA peer in the same process)
#   benchshapes the forward rows (floors included) at the two other shapes the forward is
#              judged on, 16 heads: one sequence of 32768 tokens (the state chain is the
#              critical path) and 512 sequences of 64 tokens
#   tritonkit  unpack the carried .kit/triton/triton.tar.xz (tools/gpu/triton_kit.sh: a newer
#              Triton, stripped to what an H200 run loads) into /tmp/triton-kit
#   flabwd     the fwd+bwd rows of every family (FLABWD_CASES: a bench --cases filter) with
#              /tmp/triton-kit first on PYTHONPATH, so that FLA's gated backward (Triton >=
#              3.7.1 on Hopper) runs beside ours; its stage limit is 900 s (STAGE_TIMEOUT)
#   cuseqlens  malformed cu_seqlens tables on every GPU engine, forward and backward (no
#              error, uncovered rows zero) and strict mode (tests/numerics/
#              test_cu_seqlens_safety.py); then memcheck: the same under compute-sanitizer
#              memcheck with torch's caching allocator off, so that an access past any
#              tensor is an error, and with CUDNN_CUTILE_SLICE_TMA=0: the cuTile kernels
#              without TMA through sequence slices, whose tensor maps tileiras otherwise
#              builds on the device (writes memcheck reports; stage cutiletma) (compiles
#              happen in the first run: give it STAGE_TIMEOUT=900 on a machine without the
#              kernel stores)
#   cutiletma  what CUDNN_CUTILE_SLICE_TMA=0 is for and costs: memcheck of
#              test_cu_seqlens_safety.py on the default cuTile build (stage tmamemcheck:
#              reports the device-built tensor maps; its exit status is not the verdict),
#              then bench_linear_attention.py's cuTile GDN forward with the switch 1 and 0
#              (stages tmabench1 / tmabench0)
#   guardreads every GPU engine on inputs that lie between NaN rows, each table malformed or
#              not (test_cu_seqlens_safety.py -k read_no_row): the out-of-bounds read check
#              that covers the default (TMA) cuTile build, which memcheck cannot run
#   seqcost    bench/cu_seqlens_cost.py: what that safety costs at the bench shape
#   cutilememcheck tools/gpu/cutile_memcheck_probe.py: small cuTile kernels that take
#              la_wy_fwd's slice accesses apart (bounds from device memory, the same with
#              TMA off, bounds as launch arguments, no slice view) and the GDN forward on
#              a well-formed table, each in its own process under compute-sanitizer
#              memcheck; prints which cases report errors (compiles in the first runs:
#              STAGE_TIMEOUT=900)
#   decode     the recurrent (decode) engine: its kernels precompiled first on this machine's
#              cores into .frostcache (frost_precompile.py --suites decode, stage decodebuild;
#              kept, not packed), then tests/numerics/test_la_decode_gpu.py (state pools over
#              several calls, checkpoints, bad slots, 100 decode steps in a CUDA graph) and
#              bench/bench_decode.py (stage decodebench: decode steps and 4- and 16-token
#              speculative steps vs FLA's fused_recurrent and the state-traffic floor);
#              between them stage decodehost
#   decodevec  the recurrent kernel's variants (NOTES_decode.md): test_la_decode_gpu.py with
#              FROST_DECODE_VEC=1 (contiguous channels, vector state accesses; its variants
#              test runs every variant against the default), then bench_decode.py --tokens 1,4
#              --columns op for FROST_DECODE_VEC x FROST_DECODE_BV64 in {0,1}^2 (~5-10 min)
#   decodesan  bench/bench_decode.py under compute-sanitizer memcheck (DECODESAN_BATCHES,
#              default 256,1024): attributes an illegal access to the op's or FLA's kernel
#   decodehost tests/torch_ops/op_overhead.py --serve: host time of a cached serving call (decode
#              step at batch 1, new tensors each call), its launch, and whether every timed
#              call took the launch lane (checked calls 0)
#   overhead   tests/torch_ops/op_overhead.py on the GPU (cached-call host overhead)
#   stagetimes bench/frost_stage_times.py (STAGE_FAMILIES, default "gdn kda")
#   calls      bench/frost_call_overhead.py: host time of one FROST launch (checked, bound,
#              bare call, TVM-FFI)
#   ncu        Nsight Compute warp-state and source-counter sections (stall reasons, hottest
#              SASS) for one FROST forward launch (NCU_FAMILY=gdn|kda|gdn2, default gdn);
#              ncu reads the counters on these machines; FROST_FWD_DECAY / FROST_FWD_GRAM
#              pick the kernel as for frost_stage_times.py (e.g. FROST_FWD_DECAY=scaled-ws:
#              the warp-specialised forward)
#   ncubwd     the same for the FROST backward's kernels at the bench shape
#              (bench/frost_bwd_profile.py; NCU_FAMILY=gdn|kda|gdn2, default gdn): details of
#              all, one per-SASS CSV per kernel found (ncu_bwd_<family>_{states,chain,grads}_
#              sass.csv; "states" is whichever kernel recomputes or reads the states: the
#              recompute path's is the training forward, fwd_wgmma) for tools/gpu/ncu_source_report.py;
#              FROST_BWD_CHAIN picks the chain kernel as for the backward smoke (its run_bwd)
# The FROST_FWD_* and FROST_BWD_* variables the stages set are the test tooling's switches
# (engines_frost/tests/frost_fwd_experiments.py, frost_bwd_experiments.py), which the smoke
# scripts and bench/ enter; the product reads none of them.
# Each stage runs under `timeout` (STAGE_TIMEOUT, default 300 s) so one hang cannot eat the
# call; the summary line per stage says pass/FAIL/timeout. cuTile's disk cache is kept in
# .tilecache (ignored by git), so kernels JIT once per machine, not once per process.
set -u
OUT="${OUT:-/tmp/gpu_suite_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export CUDA_TILE_CACHE_DIR="${CUDA_TILE_CACHE_DIR:-$PWD/.tilecache}"
# what the caller's environment (the kits' env.sh) put there, for stages that run another tree
BASE_PYTHONPATH="${PYTHONPATH:-}"
# the carried wheels, then this checkout's source roots (tools/pythonpath.py) and bench/
export PYTHONPATH="/tmp/site:$(python3 tools/pythonpath.py):$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
export CUDNN_WHEELS="${CUDNN_WHEELS:-/opt/cudnn-wheels}"
# TOOLCHAIN_ENV: a shell file someone prepared on the machine beforehand that adds CuTe DSL
# / cuTile to PYTHONPATH and PATH, sourced when given (a convenience for repeated runs; the
# wheel stages are this repository's own way to install them).
if [ -n "${TOOLCHAIN_ENV:-}" ]; then source "$TOOLCHAIN_ENV"; fi
TMO="${STAGE_TIMEOUT:-300}"
SUMMARY=()

# frostwgmmal2: the GDN stage times with and without the q/k L2 norms, wgmma and pipelined (kernel
# times, back to back: the smoke's per-call timing once showed l2norm costing wgmma 0.22 ms)
FROSTWGMMA_L2="python3 bench/frost_stage_times.py --family gdn --algorithm wgmma --l2norm && \
  python3 bench/frost_stage_times.py --family gdn --algorithm pipelined && \
  python3 bench/frost_stage_times.py --family gdn --algorithm pipelined --l2norm"

stage() {  # stage NAME CMD...: run CMD with a timeout, log to $OUT/NAME.log
  local name="$1"; shift
  local t0=$SECONDS
  echo "=== $name: $*"
  timeout "$TMO" bash -c "$*" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  local word=pass
  [ "$rc" = 124 ] && word=timeout
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && word="FAIL(rc=$rc)"
  SUMMARY+=("$name: $word in $((SECONDS - t0)) s")
}

fwd_knob_stages() {  # fwd_knob_stages ARG NAME VAR=VALUE: a vector-gate wgmma forward knob's stages
  # NAMEtest, the KDA and GDN-2 forward smoke (wgmma) vs float64 with VAR=VALUE, and NAMEbench,
  # tree_ab.sh of this checkout against itself with it; ARG (the stage asked for) picks one
  local arg="$1" name="$2" knob="$3"
  [ "$arg" = "${name}bench" ] || stage "${name}test" "for f in kda gdn2; do $knob python3 \
    tests/numerics/la_frost_smoke.py --family \$f --algorithm wgmma || exit 1; done"
  [ "$arg" = "${name}test" ] || stage "${name}bench" "AB_SMOKE_FAMILIES='' AB_REPS=20 \
    AB_CASES='KDA fwd;GDN-2 fwd;KDA fwd+bwd;GDN-2 fwd+bwd' PYTHONPATH='$BASE_PYTHONPATH' \
    bash tools/gpu/tree_ab.sh .::$knob \${AB_ROUNDS:-2}"
}

for s in "$@"; do
  case "$s" in
    wheels)
      stage wheels "bash tools/gpu/add_wheels.sh \$CUDNN_WHEELS" ;;
    install)
      # the build tools first: a Python 3.12 venv has no setuptools of its own
      stage install "python3 -m pip install -q --no-index --find-links \$CUDNN_WHEELS 'setuptools>=77' \
        'pybind11>=2.12' && python3 -m pip install -q --no-index --find-links \$CUDNN_WHEELS --find-links .whl \
        --no-build-isolation '.[all]' && rm -rf build && cd /tmp && env -u PYTHONPATH python3 -m cudnn env" ;;
    product)     # what a user of the installed package sees: no PYTHONPATH, not in the checkout
      stage product "cd /tmp && env -u PYTHONPATH python3 $PWD/tools/gpu/readme_example.py $PWD/README.md && \
        env -u PYTHONPATH python3 -m cudnn explain gdn kda gdn_bwd --seqs 2 --seq_len 4096 && \
        env -u PYTHONPATH python3 -m cudnn precompile gdn kda gdn2 --seqs 2 --seq_len 4096 --backward && \
        env -u PYTHONPATH python3 -m cudnn bench gdn kda gdn2 --seqs 8 --seq_len 4096 && \
        env -u PYTHONPATH python3 -m cudnn env" ;;
    setup)
      stage setup "python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader" ;;
    tilecache)   # reuse cuTile kernels compiled earlier (carried .kit/tilecache.tar.xz); the
                 # stamp (keys present) lets packcache count the kernels this machine JIT-ed
      stage tilecache "[ -f .kit/tilecache.tar.xz ] && tar xJf .kit/tilecache.tar.xz && \
        python3 tools/gpu/cutile_cache_report.py .tilecache --stamp .tilecache/.unpacked" ;;
    frostcache)  # FROST kernels precompiled on the build machine (carried .kit/frostcache.tar.xz)
      stage frostcache "[ -f .kit/frostcache.tar.xz ] && rm -rf .frostcache && tar xJf .kit/frostcache.tar.xz \
        && du -sh .frostcache && ls .frostcache | grep -c '[.]o$'"
      # stages run in subshells: the variable is set here, in the script's own shell
      [ -d .frostcache ] && export FROST_KERNEL_CACHE="$PWD/.frostcache" ;;
    frostbuild)  # compile the FROST kernels the suites need here, on all cores (the build
                 # machine has 2), into .frostcache (kept: an unpacked .kit store seeds it);
                 # the store comes back as $OUT/frostcache.tar.xz for .kit/ on the build host
      stage frostbuild "python3 tools/gpu/frost_precompile.py --native --jobs \$(nproc) --out .frostcache \
        --suites \${FROST_BUILD_SUITES:-torchops,frostmatrix,bench,stagetimes,frostsmoke,cuseqlens} \
        --smoke-algorithms \${FROST_BUILD_SMOKE_ALGORITHMS:-wgmma} --pack $OUT/frostcache.tar.xz"
      [ -d .frostcache ] && export FROST_KERNEL_CACHE="$PWD/.frostcache" ;;
    packcache)   # bring this machine's cuTile kernel cache back (then keep it in .kit/)
      stage packcache "python3 tools/gpu/cutile_cache_report.py .tilecache \
        \$( [ -f .tilecache/.unpacked ] && echo --since .tilecache/.unpacked ) && \
        tar cf - --exclude=.tilecache/.unpacked .tilecache | xz -T0 -6 > $OUT/tilecache.tar.xz \
        && ls -la $OUT/tilecache.tar.xz" ;;
    backend)     # the editable build puts the extension in backend_cc/cudnn/; --prefix keeps
                 # the install itself (unused: PYTHONPATH has the sources) out of the system
      stage backend "python3 -m pip install -q --no-index --no-build-isolation --no-deps \
        --prefix /tmp/editable -e . && python3 -m pytest tests/backend -q -s -p no:cacheprovider" ;;
    backendlog)   # the backend tests again with cuDNN's own error log (why a graph failed)
      stage backendlog "CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr python3 -m pytest tests/backend \
        -q -p no:cacheprovider -k '${BACKEND_K:-pointwise_chain or sdpa_backward}' 2>&1 | \
        grep -v '^$' | tail -150" ;;
    moe)         # the cases' processes print cuDNN's error log (CUDNN_LOGLEVEL_DBG=2) on failure
      stage moe "{ python3 -c 'import cudnn._pybind_module' 2>/dev/null || python3 -m pip install -q \
        --no-index --no-build-isolation --no-deps --prefix /tmp/editable -e . ; } && \
        python3 -m pytest tests/backend/test_moe_modes_backend.py -q -s -rs -p no:cacheprovider" ;;
    moememcheck) # after stage moe (or backend): the extension must be built
      stage moememcheck "command -v compute-sanitizer || { echo 'compute-sanitizer is not on PATH'; exit 3; }; \
        rc=0; for c in \${MOE_CASES:-gather_E4_top2 gather_E3_top1 scatter_E4_top2 scatter_E3_top1}; do \
        echo \"--- \$c\"; PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --report-api-errors no --print-limit 4 \
        --error-exitcode 1 python3 tests/backend/moe_modes_probe.py \$c 2>&1 | grep -v '^\$' | tail -40; \
        [ \${PIPESTATUS[0]} = 0 ] || rc=1; done; exit \$rc" ;;
    torchops)
      stage torchops "python3 -m pytest tests/torch_ops/ops_gpu_test.py -q -s -p no:cacheprovider \
        && python3 tests/torch_ops/op_overhead.py --device cuda --family gdn --family kda --profile 25" ;;
    overhead)    # the cached-call overhead alone (forward: FROST, so the CuTe DSL suffices)
      stage overhead "python3 tests/torch_ops/op_overhead.py --device cuda --family gdn --family kda --profile 25" ;;
    stagetimes)  # FROST per-chunk stage costs (stages compiled out one at a time)
      stage stagetimes "python3 bench/frost_stage_times.py --family ${STAGE_FAMILIES:-gdn kda}" ;;
    census)      # the kernels one public-op call launches and each one's device time (torch.profiler:
                 # the dispatcher path, so fwd+bwd recomputes the states)
      stage census "python3 bench/op_kernel_census.py && python3 bench/op_kernel_census.py --mode fwd" ;;
    nosync)      # the public op's fwd+bwd enqueues without waiting for the GPU
      stage nosync "python3 -m pytest tests/torch_ops/no_host_sync_gpu_test.py -q -s -p no:cacheprovider" ;;
    calls)       # host cost of one FROST launch by calling convention (TVM-FFI needs its wheel in .whl)
      stage calls "python3 bench/frost_call_overhead.py" ;;
    ncu)         # one FROST forward launch under Nsight Compute (NCU_FAMILY, default gdn), full
                 # set with PC sampling; the report comes back ($OUT/ncu_<family>.ncu-rep) with a
                 # per-SASS-instruction CSV (executions, stall samples by reason) for
                 # tools/gpu/ncu_source_report.py here (with --lines, a map of the same kernel
                 # made here by tools/gpu/sass_line_map.py --family <family>: samples per function)
      NF="${NCU_FAMILY:-gdn}"
      stage ncu "command -v ncu && ncu --clock-control none --set full --import-source no \
        -k regex:cutlass --launch-skip 3 --launch-count 1 -f -o $OUT/ncu_$NF \
        python3 bench/frost_stage_times.py --family $NF --reps 1 --only-full && \
        ncu -i $OUT/ncu_$NF.ncu-rep --page details --print-details all \
          --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables && \
        ncu -i $OUT/ncu_$NF.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${NF}_sass.csv; \
        ls -la $OUT/ncu_$NF*" ;;
    ncubwd)      # a backward's kernels under Nsight Compute (one warm backward in a profiler
                 # range; NCU_FAMILY, default gdn); the kernel-name filter picks each SASS page
      NF="${NCU_FAMILY:-gdn}"
      stage ncubwd "command -v ncu && ncu --profile-from-start off --clock-control none --set full \
        --import-source no -f -o $OUT/ncu_bwd_$NF python3 bench/frost_bwd_profile.py --family $NF && \
        ncu -i $OUT/ncu_bwd_$NF.ncu-rep --page details --print-details all > $OUT/ncu_bwd_$NF.txt && \
        for k in states:'bwd_states|bwd_values|fwd_wgmma' chain:bwd_chain grads:bwd_grads; do \
          ncu -i $OUT/ncu_bwd_$NF.ncu-rep -k \"regex:\${k#*:}\" --page source --csv --print-source sass \
          > $OUT/ncu_bwd_${NF}_\${k%%:*}_sass.csv; done; ls -la $OUT/ncu_bwd*" ;;
    cutile)
      stage cutile "python3 -m pytest tests/numerics/test_la_cutile_engines.py -q -s -p no:cacheprovider" ;;
    smoke)
      stage smoke "python3 tests/numerics/la_cutile_smoke.py kda && \
        python3 tests/numerics/la_cutile_bwd_smoke.py" ;;
    frostwgmma)     # forward wgmma on warpgroup MMA: precompile, smoke (pipelined and wgmma), stage times, matrix
      stage frostwgmmabuild "python3 tools/gpu/frost_precompile.py --native --jobs \$(nproc) --out .frostcache \
        --suites frostsmoke,stagetimes,frostmatrix --smoke-algorithms pipelined,wgmma --engine-algorithms wgmma --keep --pack ''"
      [ -d .frostcache ] && export FROST_KERNEL_CACHE="$PWD/.frostcache"
      stage frostwgmmasmoke "python3 tests/numerics/la_frost_smoke.py --family all --algorithm pipelined wgmma"
      stage frostwgmmastages "python3 bench/frost_stage_times.py --family gdn kda --algorithm wgmma"
      stage frostwgmmal2 "$FROSTWGMMA_L2"
      stage frostwgmmamatrix "python3 -m pytest tests/numerics/test_la_frost_engines.py -q -s \
        -p no:cacheprovider --frost-fwd-kernel wgmma" ;;
    frostwgmmal2)   # what use_l2norm costs pipelined and wgmma GDN, per stage (kernels compiled on first use)
      stage frostwgmmal2 "$FROSTWGMMA_L2" ;;
    frost|frostsmoke|frostmatrix)
      if [ "$s" != frostmatrix ]; then
        stage frostsmoke "python3 tests/numerics/la_frost_smoke.py --family all ${FROST_SMOKE_ARGS:-}"
      fi
      if [ "$s" != frostsmoke ]; then
        stage frostmatrix "python3 -m pytest tests/numerics/test_la_frost_engines.py -q -s \
          -p no:cacheprovider ${FROST_MATRIX_ARGS:-}"
      fi ;;
    frostbwd)
      stage frostbwdsmoke "python3 tests/numerics/la_frost_bwd_smoke.py --matrix --jobs \$(nproc) \
        ${FROST_BWD_SMOKE_ARGS:-}"
      stage frostbwdmatrix "python3 -m pytest tests/numerics/test_la_frost_bwd_engines.py -q -s \
        -p no:cacheprovider ${FROST_BWD_MATRIX_ARGS:-}" ;;
    bwdmatrix)
      stage bwdmatrix "MATRIX=bwd bash tools/gpu/matrix_families.sh \${BWD_MATRIX_FAMILIES:-}" ;;
    fwdmatrix)
      stage fwdmatrix "MATRIX=fwd bash tools/gpu/matrix_families.sh \${FWD_MATRIX_FAMILIES:-}" ;;
    treeab)
      stage treeab "PYTHONPATH='$BASE_PYTHONPATH' bash tools/gpu/tree_ab.sh \${AB_TREE:?AB_TREE: the other tree(s)} \
        \${AB_ROUNDS:-2}" ;;
    bwdab|bwdabdecay|bwdabbench)
                 # A/B of the vector-gate backward's switches (on by default): the grads'
                 # fused exponent (FROST_BWD_VEC_DECAY=1, NOTES_bwd.md v1.9) against float64 on
                 # KDA and GDN-2, then the KDA and GDN-2 op rows (FROST columns) with neither, each
                 # and both of it and the vector-gate wgmma chain (FROST_BWD_CHAIN_VEC=wgmma; its
                 # own check against float64 and the serial chain: stage chainvecsmoke)
      [ "$s" = bwdabbench ] || stage bwdabdecay "FROST_BWD_VEC_DECAY=1 python3 tests/numerics/la_frost_bwd_smoke.py \
        --jobs \$(nproc) --family kda --family gdn2"
      [ "$s" = bwdabdecay ] || stage bwdabbench "for c in 'KDA fwd+bwd' 'GDN-2 fwd+bwd'; do for d in 0 1; do \
        for w in serial wgmma; do echo \"== FROST_BWD_VEC_DECAY=\$d FROST_BWD_CHAIN_VEC=\$w\"; FROST_BWD_VEC_DECAY=\$d \
        FROST_BWD_CHAIN_VEC=\$w python3 bench/bench_linear_attention.py --cases \"\$c\" --impl FROST --reps 10 \
        || exit 1; done; done; done" ;;
    chainvec|chainvecsmoke|chainvecbench)
      [ "$s" = chainvecbench ] || stage chainvecsmoke "python3 tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) \
        --family kda --family gdn2 --chain-vec wgmma-both"
      [ "$s" = chainvecsmoke ] || stage chainvecbench "for c in serial wgmma; do FROST_BWD_CHAIN_VEC=\$c python3 \
        bench/bench_linear_attention.py --cases 'KDA fwd+bwd' --reps 10 || exit 1; done" ;;
    chainasync|chainasyncsmoke|chainasyncbench)
      [ "$s" = chainasyncbench ] || stage chainasyncsmoke "python3 tests/numerics/la_frost_bwd_smoke.py \
        --jobs \$(nproc) --family gdn --family kda --family gdn2 --chain wgmma_async-both \
        --chain-vec wgmma_async-both"
      [ "$s" = chainasyncsmoke ] || stage chainasyncbench "for c in wgmma wgmma_async; do \
        echo \"== FROST_BWD_CHAIN=\$c\"; FROST_BWD_CHAIN=\$c python3 bench/bench_linear_attention.py \
        --cases 'GDN fwd+bwd' --impl FROST --reps 10 || exit 1; echo \"== FROST_BWD_CHAIN_VEC=\$c\"; \
        FROST_BWD_CHAIN_VEC=\$c python3 bench/bench_linear_attention.py --cases 'KDA fwd+bwd' --impl FROST \
        --reps 10 || exit 1; done" ;;
    gradsvec|gradsvecsmoke|gradsveccombo|gradsvecbench)
      case "$s" in gradsvec|gradsvecsmoke)
        stage gradsvecsmoke "python3 tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) \
          --family kda --family gdn2 --grads-vec wgmma-both" ;; esac
      case "$s" in gradsvec|gradsveccombo)
        stage gradsveccombo "FROST_BWD_VEC_WIDE=0 FROST_BWD_VEC_DECAY=0 python3 tests/numerics/la_frost_bwd_smoke.py \
          --jobs \$(nproc) --family kda --family gdn2 --grads-vec wgmma-both --no-time" ;; esac
      case "$s" in gradsvec|gradsvecbench)
        stage gradsvecbench "for c in 'KDA fwd+bwd' 'GDN-2 fwd+bwd'; do for g in mma wgmma; do \
          echo \"== FROST_BWD_GRADS_VEC=\$g\"; FROST_BWD_GRADS_VEC=\$g python3 bench/bench_linear_attention.py \
          --cases \"\$c\" --impl FROST --reps 10 || exit 1; done; done" ;; esac ;;
    bwdlane|bwdlanetest|bwdlanebench)  # the FROST backward's launch lane (bwd_plan.py direct_launch)
      case "$s" in bwdlane|bwdlanetest)
        stage bwdlanetest "python3 -m pytest -q -s -p no:cacheprovider tests/torch_ops/ops_gpu_test.py \
          -k backward_launch_lane && python3 tests/torch_ops/op_overhead.py --backward --device cuda \
          --family gdn --family kda --family gdn2 --iters 1000" ;; esac
      case "$s" in bwdlane|bwdlanebench)
        stage bwdlanebench "for l in 0 1; do echo \"== CUDNN_FROST_BWD_LANE=\$l\"; CUDNN_FROST_BWD_LANE=\$l \
          python3 bench/bench_linear_attention.py --cases fwd+bwd --impl 'op FROST' --reps 10 || exit 1; \
          done" ;; esac ;;
    bwdrecompute|bwdrecomputetest|bwdrecomputebench)  # the recompute path's states on the forward
      case "$s" in bwdrecompute|bwdrecomputetest)
        stage bwdrecomputetest "python3 -m pytest -q -s -p no:cacheprovider \
          tests/torch_ops/ops_gpu_test.py -k gradients_match && python3 -m pytest \
          -q -p no:cacheprovider tests/numerics/test_cu_seqlens_safety.py -k 'frost and not decode and bwd' && \
          python3 -m pytest -q -p no:cacheprovider \
          tests/torch_ops/span_split_gpu_test.py -k split_forward_gradients" ;; esac
      case "$s" in bwdrecompute|bwdrecomputebench)
        stage bwdrecomputebench "for r in 0 1; do echo \"== FROST_BWD_RECOMPUTE_FORWARD=\$r\"; \
          FROST_BWD_RECOMPUTE_FORWARD=\$r python3 bench/bench_linear_attention.py --cases fwd+bwd \
          --impl 'op FROST' --reps 10 || exit 1; done" ;; esac ;;
    tmaprobe)    # TMA boxes into the SW128 tile (the forward's warp-specialisation step 1)
      stage tmaprobe "python3 -m pytest -q -s -p no:cacheprovider -o faulthandler_timeout=40 \
        engines_frost/tests/frost_tma_rows_probe_gpu_test.py" ;;
    fwdbounds)   # the four-role forward's bounds (math / chain compiled out, splits) and the backward chain's
      stage fwdbounds "FROST_FWD_DECAY=wyc-ws4raw python3 bench/frost_stage_times.py --family gdn \
        --variants full inverse gram chain && FROST_FWD_DECAY=wyc-ws4raw FROST_FWD_WS_REGS=208,72,24 \
        python3 bench/frost_stage_times.py --family gdn --variants inverse && FROST_FWD_DECAY=wyc-ws4raw \
        FROST_FWD_WS_REGS=232,24,24 python3 bench/frost_stage_times.py --family gdn --variants gram && \
        python3 bench/frost_bwd_chain_bounds.py" ;;
    noloads)     # v ahead, TMA rows (checked, timed) beside the product and the no-loads bound
      stage noloads "python3 tests/numerics/la_frost_smoke.py --family gdn --algorithm wgmmawycws4va \
        wgmmawycws4tma wgmmawycws4tmava && for d in wyc-ws4raw wyc-ws4nl wyc-ws4va wyc-ws4tma \
        wyc-ws4tmava; do FROST_FWD_DECAY=\$d python3 \
        bench/frost_stage_times.py --family gdn --variants full chain gram --reps 30 || exit 1; done" ;;
    chainprep)   # the chain's time without its prep stages (their stored-prep ceiling)
      stage chainprep "for f in gdn kda; do for k in '' gram gram,operands; do \
        python3 bench/frost_chain_prep_times.py --family \$f --skip \"\$k\" || exit 1; done; done" ;;
    tmastream)   # the producer warp's TMA ring (the forward's warp-specialisation step 2)
      stage tmastream "python3 -m pytest -q -s -p no:cacheprovider -o faulthandler_timeout=60 \
        engines_frost/tests/frost_tma_stream_probe_gpu_test.py && \
        python3 engines_frost/tests/frost_tma_stream_probe_gpu_test.py --bench" ;;
    chainbulk|chainbulktest|chainbulkbench)
      [ "$s" = chainbulkbench ] || stage chainbulktest "FROST_BWD_CHAIN_BULK=0 FROST_BWD_CHAIN_DO=0 \
        python3 tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) --family kda --family gdn2"
      [ "$s" = chainbulktest ] || stage chainbulkbench "AB_SMOKE_FAMILIES='' AB_REPS=20 \
        AB_CASES='KDA fwd+bwd;GDN-2 fwd+bwd' PYTHONPATH='$BASE_PYTHONPATH' bash tools/gpu/tree_ab.sh \
        .::FROST_BWD_CHAIN_BULK=0::FROST_BWD_CHAIN_DO=0 .::FROST_BWD_CHAIN_BULK=0 \${AB_ROUNDS:-2}" ;;
    fwdbulk|fwdbulktest|fwdbulkbench)
      fwd_knob_stages "$s" fwdbulk FROST_FWD_ROWS=async ;;
    fwdstores|fwdstorestest|fwdstoresbench)
      fwd_knob_stages "$s" fwdstores FROST_FWD_STORES=elements ;;
    vecrows|vecrowstest)  # vector-gate grads: rows in the load phase; then an A/B of two trees
      stage vecrowstest "python3 tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) --family kda \
        --family gdn2"
      [ "$s" = vecrows ] && stage treeab "PYTHONPATH='$BASE_PYTHONPATH' bash tools/gpu/tree_ab.sh \
        \"\${AB_TREE:?AB_TREE: the other tree}\" \
        \${AB_ROUNDS:-2}" ;;
    gradsprefetch|gradsprefetchtest|gradsprefetchbench)  # GDN's grads kernel's L2 prefetch
      case "$s" in gradsprefetch|gradsprefetchtest)
        stage gradsprefetchtest "FROST_BWD_GRADS_PREFETCH=0 python3 tests/numerics/la_frost_bwd_smoke.py \
          --jobs \$(nproc) --family gdn" ;; esac
      case "$s" in gradsprefetch|gradsprefetchbench)
        stage gradsprefetchbench "for p in 0 1 0 1; do echo \"== FROST_BWD_GRADS_PREFETCH=\$p\"; \
          FROST_BWD_GRADS_PREFETCH=\$p python3 bench/bench_linear_attention.py --cases fwd+bwd \
          --impl 'op FROST' --reps 10 || exit 1; done" ;; esac ;;
    summarynoout|summarynoouttest|summarynooutbench)  # the summary passes without the output
      TMO_SAVED="$TMO"; TMO="${STAGE_TIMEOUT:-900}"
      case "$s" in summarynoout|summarynoouttest)
        stage summarynoouttest "python3 -m pytest -q -s -p no:cacheprovider \
          engines_frost/tests/frost_summary_no_output_gpu_test.py && python3 -m pytest -q -s \
          -p no:cacheprovider tests/torch_ops/span_split_gpu_test.py -k switch && \
          FROST_SUMMARY_NO_OUTPUT=1 python3 -m pytest -q -s -p no:cacheprovider \
          tests/torch_ops/span_split_gpu_test.py" ;; esac
      case "$s" in summarynoout|summarynooutbench)
        stage summarynooutbench "for f in gdn kda; do for n in 0 1; do echo \"== \$f FROST_SUMMARY_NO_OUTPUT=\$n\"; \
          FROST_SUMMARY_NO_OUTPUT=\$n python3 bench/span_split_profile.py --family \$f --reps 20 || exit 1; \
          done; done" ;; esac
      TMO="$TMO_SAVED" ;;
    spansplitlane)  # the span split with the forward summary's launch lane on
      stage spansplitlane "CUDNN_FROST_SUMMARY_LANE=1 python3 -m pytest -q -s -p no:cacheprovider \
        tests/torch_ops/span_split_gpu_test.py && for f in gdn kda; do CUDNN_FROST_SUMMARY_LANE=1 \
        python3 bench/span_split_profile.py --family \$f --backward --sync-check || exit 1; done" ;;
    spansplitprofile)  # the split's components, GPU and host time each (bench/span_split_profile.py)
      stage spansplitprofile "for f in gdn kda gdn2; do python3 bench/span_split_profile.py --family \$f \
        --backward --sync-check || exit 1; done" ;;
    spansplitshapes)  # the split off / forced at shapes the automatic rule leaves alone
      stage spansplitshapes "for shape in '2 16384' '4 8192' '1 16384'; do set -- \$shape; \
        for n in 0 4096; do echo \"== \$1 x \$2, CUDNN_LA_SPAN_TOKENS=\$n\"; for c in 'GDN fwd' 'KDA fwd'; do \
        CUDNN_LA_SPAN_TOKENS=\$n python3 bench/bench_linear_attention.py --seqs \$1 --len \$2 --reps 10 \
        --cases \"\$c\" --impl 'op FROST' || exit 1; done; done; done" ;;
    spansplit|spansplittest|spansplitbench)  # long sequences split into spans (ops/_span_split.py)
      [ "$s" = spansplitbench ] || stage spansplittest "python3 -m pytest -q -s -p no:cacheprovider \
        tests/torch_ops/span_split_gpu_test.py"
      [ "$s" = spansplittest ] || stage spansplitbench "for n in 0 ''; do echo \"== CUDNN_LA_SPAN_TOKENS=\$n\"; \
        CUDNN_LA_SPAN_TOKENS=\$n python3 bench/bench_linear_attention.py --seqs 1 --len 32768 --reps 20 --fwd-only \
        || exit 1; done; for b in 0 1; do echo \"== CUDNN_LA_SPAN_BACKWARD=\$b\"; CUDNN_LA_SPAN_BACKWARD=\$b \
        python3 bench/bench_linear_attention.py --seqs 1 --len 32768 --reps 5 --cases fwd+bwd --impl 'op FROST' \
        || exit 1; done" ;;
    gramwgmma|gramwgmmasmoke|gramwgmmatrain|gramwgmmastages|gramwgmmabench)  # GDN Gram on wgmma (FROST_FWD_GRAM=wgmma) vs wgmma
      [ "$s" = gramwgmma ] || [ "$s" = gramwgmmasmoke ] && stage gramwgmmasmoke "python3 \
        tests/numerics/la_frost_smoke.py --family gdn --algorithm wgmma wgmmagram wgmmagram16 wgmmagram64"
      [ "$s" = gramwgmma ] || [ "$s" = gramwgmmatrain ] && stage gramwgmmatrain "FROST_FWD_GRAM=wgmma python3 \
        tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) --family gdn --fwd-kernel wgmma"
      [ "$s" = gramwgmma ] || [ "$s" = gramwgmmastages ] && stage gramwgmmastages "for m in mma wgmma16 wgmma wgmma64; do \
        echo \"== FROST_FWD_GRAM=\$m\"; FROST_FWD_GRAM=\$m python3 bench/frost_stage_times.py --family gdn \
        --algorithm wgmma --l2norm || exit 1; done"
      [ "$s" = gramwgmma ] || [ "$s" = gramwgmmabench ] && stage gramwgmmabench "for m in mma wgmma16 wgmma wgmma64; do \
        echo \"== FROST_FWD_GRAM=\$m\"; FROST_FWD_GRAM=\$m python3 bench/bench_linear_attention.py --fwd-only \
        --cases 'GDN fwd' --reps 20 || exit 1; done"
      true ;;
    scaled|scaledsmoke|scaledtrain|scaledbench)  # GDN decays as factors (FROST_FWD_DECAY=scaled) vs wgmma
      [ "$s" = scaled ] || [ "$s" = scaledsmoke ] && stage scaledsmoke "python3 \
        tests/numerics/la_frost_smoke.py --family gdn --algorithm wgmma wgmmascaled wgmmascaledlead wgmmascaledws"
      [ "$s" = scaled ] || [ "$s" = scaledtrain ] && stage scaledtrain "for d in scaled scaled-lead scaled-ws; do \
        echo \"== FROST_FWD_DECAY=\$d\"; FROST_FWD_DECAY=\$d python3 tests/numerics/la_frost_bwd_smoke.py \
        --jobs \$(nproc) --family gdn --fwd-kernel wgmma || exit 1; done"
      [ "$s" = scaled ] || [ "$s" = scaledbench ] && stage scaledbench "for d in folded scaled scaled-lead scaled-ws folded; do \
        echo \"== FROST_FWD_DECAY=\$d\"; FROST_FWD_DECAY=\$d python3 bench/bench_linear_attention.py --fwd-only \
        --cases 'GDN fwd' --impl FROST --reps 20 && FROST_FWD_DECAY=\$d python3 bench/bench_linear_attention.py \
        --cases 'GDN fwd+bwd' --impl 'op FROST' --reps 10 || exit 1; done"
      true ;;
    bwdscaled|bwdscaledsmoke|bwdscaledbench)  # GDN backward chain with the decays as factors
      [ "$s" = bwdscaled ] || [ "$s" = bwdscaledsmoke ] && stage bwdscaledsmoke "for c in wgmma_scaled wgmma_ws; do \
        echo \"== FROST_BWD_CHAIN=\$c\"; FROST_BWD_CHAIN=\$c python3 tests/numerics/la_frost_bwd_smoke.py \
        --jobs \$(nproc) --family gdn || exit 1; done"
      [ "$s" = bwdscaled ] || [ "$s" = bwdscaledbench ] && stage bwdscaledbench "for v in default folded ws wsfwd default; do \
        echo \"== \$v\"; case \$v in default) e='';; folded) e='FROST_BWD_CHAIN=wgmma_async FROST_FWD_DECAY=folded';; \
        ws) e='FROST_BWD_CHAIN=wgmma_ws';; wsfwd) e='FROST_BWD_CHAIN=wgmma_ws FROST_FWD_DECAY=scaled-ws';; esac; \
        env \$e python3 bench/bench_linear_attention.py --cases 'GDN fwd+bwd' --impl 'op FROST' --reps 10 \
        || exit 1; done"
      true ;;
    wy|wysmoke|wytrain|wybench)  # the full inverse on the producer (FROST_FWD_DECAY=wy-ws) vs the product
      WY_SMOKE="${WY_SMOKE:-wgmmascaled wgmmascaledws wgmmawyws wgmmawycws wgmmawyws64 wgmmawycws64}"
      export FROST_KERNEL_CACHE="${FROST_KERNEL_CACHE:-$PWD/.frostcache}"
      # each variant's kernels compiled in its own process first (16 cores), then run in turn
      [ "$s" = wy ] || [ "$s" = wysmoke ] && stage wysmoke "for a in $WY_SMOKE; do \
        python3 tests/numerics/la_frost_smoke.py --family gdn --algorithm \$a > /dev/null 2>&1 & done; wait; \
        python3 tests/numerics/la_frost_smoke.py --family gdn --algorithm $WY_SMOKE"
      [ "$s" = wy ] || [ "$s" = wytrain ] && stage wytrain "for d in wy-ws wyc-ws; do echo \"== \$d\"; \
        FROST_FWD_DECAY=\$d python3 tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) --family gdn \
        --fwd-kernel wgmma || exit 1; done; echo '== FROST_BWD_CHAIN=wgmma_wy'; FROST_BWD_CHAIN=wgmma_wy python3 \
        tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) --family gdn"
      [ "$s" = wy ] || [ "$s" = wybench ] && stage wybench "rowenv() { case \$1 in product) e='';; \
        wy) e='FROST_FWD_DECAY=wy-ws';; wyc) e='FROST_FWD_DECAY=wyc-ws';; bwdwy) e='FROST_BWD_CHAIN=wgmma_wy';; \
        both) e='FROST_FWD_DECAY=wy-ws FROST_BWD_CHAIN=wgmma_wy';; \
        wy208) e='FROST_FWD_DECAY=wy-ws FROST_FWD_WS_REGS=208,48';; esac; }; \
        for r in product wy wyc wy208 bwdwy both; do rowenv \$r; (env \$e python3 bench/bench_linear_attention.py \
        --fwd-only --cases 'GDN fwd' --impl FROST --reps 1; env \$e python3 bench/bench_linear_attention.py \
        --cases 'GDN fwd+bwd' --impl 'op FROST' --reps 1) > \$OUT/wybench_warm_\$r.txt 2>&1 & done; wait; \
        for r in product wy wyc wy208 bwdwy both product; do \
        echo \"== forward \$r\"; rowenv \$r; env \$e python3 \
        bench/bench_linear_attention.py --fwd-only --cases 'GDN fwd' --impl FROST --reps 20 && env \$e python3 \
        bench/bench_linear_attention.py --cases 'GDN fwd+bwd' --impl 'op FROST' --reps 10 || exit 1; done"
      true ;;
    bwdfour|bwdfoursmoke|bwdfourbench)  # the backward's wy chain in four roles (bwd_chain_ws4.py)
      export FROST_KERNEL_CACHE="${FROST_KERNEL_CACHE:-$PWD/.frostcache}"
      BWD_FOUR="${BWD_FOUR:-wgmma_ws4rawc wgmma_ws4c wgmma_ws4raw wgmma_ws4}"
      case "$s" in bwdfour|bwdfoursmoke) stage bwdfoursmoke "for c in $BWD_FOUR; do echo \"== \$c\"; \
        FROST_BWD_CHAIN=\$c python3 tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) --family gdn || exit 1; \
        done; for c in wgmma_scaled $BWD_FOUR; do \
        echo \"== FROST_BWD_CHAIN=\$c\"; FROST_BWD_CHAIN=\$c python3 tests/numerics/la_frost_bwd_smoke.py \
        --family gdn --only mixed || exit 1; done";; esac
      case "$s" in bwdfour|bwdfourbench) stage bwdfourbench "for c in wgmma_scaled $BWD_FOUR wgmma_scaled \
        $BWD_FOUR; do echo \"== FROST_BWD_CHAIN=\$c\"; FROST_BWD_CHAIN=\$c python3 bench/bench_linear_attention.py \
        --cases 'GDN fwd+bwd' --impl 'op FROST' --reps 10 | grep '^| GDN' || exit 1; done";; esac
      true ;;
    fourroles|fourrolessmoke|fourrolesmatrix|fourrolesgate)  # GDN's four-role forward (fwd_ws4.py)
      export FROST_KERNEL_CACHE="${FROST_KERNEL_CACHE:-$PWD/.frostcache}"
      FR_SMOKE="${FR_SMOKE:-wgmmascaled wgmmawycws4raw}"
      # each variant vs float64 with its kernel times (compiled side by side first)
      case "$s" in fourroles|fourrolessmoke) stage fourrolessmoke "for a in $FR_SMOKE; do \
        python3 tests/numerics/la_frost_smoke.py --family gdn --algorithm \$a > /dev/null 2>&1 & done; wait; \
        python3 tests/numerics/la_frost_smoke.py --family gdn --algorithm $FR_SMOKE";; esac
      # the product path, no knob: long mixed-length GDN cases take the four roles
      case "$s" in fourroles|fourrolesmatrix) stage fourrolesmatrix "python3 -m pytest \
        tests/numerics/test_la_frost_engines.py -q -s -p no:cacheprovider -k 'gdn and not gdn2'";; esac
      # the 512-token gate (compile_kernel.four_roles_apply): each decay forced at 1 to 64 chunks per sequence
      case "$s" in fourroles|fourrolesgate) stage fourrolesgate "S='8:4096 64:512 128:256 256:128 512:64'; \
        for d in scaled wyc-ws4raw; do for x in \$S; do FROST_FWD_DECAY=\$d python3 bench/bench_linear_attention.py \
        --fwd-only --cases 'GDN fwd' --impl FROST --reps 1 --seqs \${x%%:*} --len \${x#*:} > /dev/null 2>&1 & done; \
        done; wait; for d in scaled wyc-ws4raw scaled wyc-ws4raw; do for x in \$S; do echo \"== \$d \$x\"; \
        FROST_FWD_DECAY=\$d python3 bench/bench_linear_attention.py --fwd-only --cases 'GDN fwd' --impl FROST \
        --reps 30 --seqs \${x%%:*} --len \${x#*:} | grep '^| GDN' || exit 1; done; done";; esac
      true ;;
    wysplit)     # the full-inverse forwards at each register split and Gram (WY_SPLITS: decay:consumer,producer[:gram])
      export FROST_KERNEL_CACHE="${FROST_KERNEL_CACHE:-$PWD/.frostcache}"
      ROWS="${WY_SPLITS:-wyc-ws:208,48 wyc-ws:184,72 wyc-ws:168,88 wy-ws:192,64 wy-ws:176,80 \
        wy-ws:192,64:wgmma64 wyc-ws:192,64:wgmma64 wy-ws:192,64:wgmma wy-ws:184,72:wgmma64}"
      stage wysplit "rowenv() { e=; [ \$1 = product ] && return; d=\${1%%:*}; x=\${1#*:}; \
        g=mma; case \$x in *:*) g=\${x#*:}; x=\${x%%:*};; esac; \
        e=\"FROST_FWD_DECAY=\$d FROST_FWD_WS_REGS=\$x FROST_FWD_GRAM=\$g\"; }; \
        for r in $ROWS; do rowenv \$r; env \$e python3 bench/bench_linear_attention.py --fwd-only \
        --cases 'GDN fwd' --impl FROST --reps 1 > /dev/null 2>&1 & done; wait; \
        for r in product $ROWS product; do echo \"== forward \$r\"; rowenv \$r; env \$e python3 \
        bench/bench_linear_attention.py --fwd-only --cases 'GDN fwd' --impl FROST --reps 20 || exit 1; done" ;;
    wssplit|wssplitfwd|wssplitbwd)  # the warp-specialised kernels' setmaxnreg splits (WS_SPLITS)
      SPLITS="${WS_SPLITS:-208,48 200,56 184,72}"
      export FROST_KERNEL_CACHE="${FROST_KERNEL_CACHE:-$PWD/.frostcache}"
      # the forwards compiled side by side first (one process per split), then timed in turn
      [ "$s" = wssplitbwd ] || stage wssplitfwd "python3 tools/gpu/frost_precompile.py --native --jobs 2 \
        --out \$FROST_KERNEL_CACHE --suites bench --families gdn --keep --pack '' > /dev/null & \
        for r in default $SPLITS; do [ \$r = default ] && r=; FROST_FWD_DECAY=scaled-ws FROST_FWD_WS_REGS=\$r \
        python3 tools/gpu/frost_precompile.py --native --jobs 2 --out \$FROST_KERNEL_CACHE --suites bench \
        --families gdn --keep --pack '' > /dev/null & done; wait; \
        for r in product default $SPLITS product; do \
        echo \"== forward \$r\"; case \$r in product) e='';; default) e='FROST_FWD_DECAY=scaled-ws';; \
        *) e=\"FROST_FWD_DECAY=scaled-ws FROST_FWD_WS_REGS=\$r\";; esac; env \$e python3 \
        bench/bench_linear_attention.py --fwd-only --cases 'GDN fwd' --impl FROST --reps 20 || exit 1; done"
      # one case against float64 (the split changes no arithmetic) and the kernel times
      [ "$s" = wssplitfwd ] || stage wssplitbwd "for r in product default $SPLITS; do \
        echo \"== chain \$r\"; case \$r in product) e='';; default) e='FROST_BWD_CHAIN=wgmma_ws';; \
        *) e=\"FROST_BWD_CHAIN=wgmma_ws FROST_BWD_WS_REGS=\$r\";; esac; env \$e python3 \
        tests/numerics/la_frost_bwd_smoke.py --jobs \$(nproc) --family gdn --only mixed || exit 1; done"
      true ;;
    wgmmatrain|wgmmatrainsmoke|wgmmatrainbench)  # training forward: pipelined forced against the product's (wgmma), smoke and A/B
      [ "$s" = wgmmatrainbench ] || stage wgmmatrainsmoke "python3 tests/numerics/la_frost_bwd_smoke.py \
        --jobs \$(nproc) --family gdn --family kda --family gdn2 --fwd-kernel pipelined"
      [ "$s" = wgmmatrainsmoke ] || stage wgmmatrainbench "for k in pipelined product; do echo \"== FROST forward \$k\"; \
        python3 bench/bench_linear_attention.py --cases fwd+bwd --impl FROST --reps 10 --frost-fwd-kernel \$k \
        || exit 1; done" ;;
    gradsvecncu) # the KDA grads kernel under Nsight Compute, mma.sync vs wgmma state products
      stage gradsvecncu "command -v ncu && for g in mma wgmma; do FROST_BWD_GRADS_VEC=\$g ncu --profile-from-start off \
        --clock-control none --set full --import-source no -f -o $OUT/ncu_gradsvec_\$g \
        python3 bench/frost_bwd_profile.py --family kda --stages grads && \
        ncu -i $OUT/ncu_gradsvec_\$g.ncu-rep --page details --print-details all > $OUT/ncu_gradsvec_\$g.txt && \
        ncu -i $OUT/ncu_gradsvec_\$g.ncu-rep -k regex:bwd_grads --page source --csv --print-source sass \
          > $OUT/ncu_gradsvec_\${g}_sass.csv || exit 1; done; ls -la $OUT/ncu_gradsvec*" ;;
    summary)     # FROST span summaries vs float64; context parallelism (one GPU, NCCL, timing)
      export FROST_KERNEL_CACHE="${FROST_KERNEL_CACHE:-$PWD/.frostcache}"
      stage summarybuild "python3 tests/numerics/frost_summary_prebuild.py --jobs \$(nproc)"
      stage summarymatrix "python3 -m pytest tests/numerics/test_la_frost_summary_engines.py -q -s \
        -p no:cacheprovider"
      stage cpinproc "python3 -m pytest tests/context_parallel/cp_in_process_gpu_test.py -q -s \
        -p no:cacheprovider"
      stage cpnccl "python3 -m pytest tests/context_parallel/cp_nccl_gpu_test.py -q -s -p no:cacheprovider"
      stage cpbench "python3 bench/context_parallel_bench.py ${CP_BENCH_ARGS:-}" ;;
    cpbench)     # the context-parallel timing alone (its kernels: stage summary's summarybuild)
      export FROST_KERNEL_CACHE="${FROST_KERNEL_CACHE:-$PWD/.frostcache}"
      stage cpbench "python3 bench/context_parallel_bench.py ${CP_BENCH_ARGS:-}" ;;
    fla)         # the FLA drop-in on the engines vs transformers' torch path (needs FROST)
      stage fla "python3 -m pytest tests/fla/gpu_test.py -q -s -p no:cacheprovider" ;;
    fladiag)     # where a generation step's logits part from the torch path, and why
      stage fladiag "python3 tests/fla/greedy_diagnose.py && python3 tests/fla/greedy_diagnose.py --dense" ;;
    bench)
      stage bench "python3 bench/bench_linear_attention.py" ;;
    benchshapes)
      stage benchshapes "python3 bench/bench_linear_attention.py --fwd-only --seqs 1 --len 32768 && \
        python3 bench/bench_linear_attention.py --fwd-only --seqs 512 --len 64" ;;
    tritonkit)   # a newer Triton for FLA's gated backward (carried .kit/triton, triton_kit.sh)
      stage tritonkit "mkdir -p /tmp/triton-kit && tar xJf .kit/triton/triton.tar.xz -C /tmp/triton-kit && \
        PYTHONPATH=/tmp/triton-kit python3 -c 'import triton; print(\"triton\", triton.__version__)'" ;;
    flabwd)      # fwd+bwd of every family (FLABWD_CASES: one of them, e.g. 'KDA fwd+bwd'), FLA's
                 # backward on the unpacked newer Triton (tritonkit); FLA's KDA and GDN-2
                 # autotuning outruns the default 300 s stage limit, so 900 s here
      TMO_SAVED="$TMO"; TMO="${STAGE_TIMEOUT:-900}"
      stage flabwd "PYTHONPATH=/tmp/triton-kit:\$PYTHONPATH \
        TRITON_PTXAS_BLACKWELL_PATH=/tmp/triton-kit/triton/backends/nvidia/bin/ptxas \
        python3 bench/bench_linear_attention.py \
        --cases '${FLABWD_CASES:-fwd+bwd}' --reps 10"
      TMO="$TMO_SAVED" ;;
    cuseqlens)
      stage cuseqlens "python3 -m pytest tests/numerics/test_cu_seqlens_safety.py -q -rs \
        -p no:cacheprovider"
      # SLICE_TMA=0: with TMA the cuTile kernels write their sequence slices' tensor maps
      # into global memory, which memcheck reports as out-of-bounds atomics (stage cutiletma)
      stage memcheck "command -v compute-sanitizer || { echo 'compute-sanitizer is not on PATH'; exit 3; }; \
        CUDNN_CUTILE_SLICE_TMA=0 PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --report-api-errors no \
        --error-exitcode 1 python3 -m pytest tests/numerics/test_cu_seqlens_safety.py -q -rs \
        -p no:cacheprovider" ;;
    cutiletma)   # no --error-exitcode: the default build's reports are expected, the log
                 # (first 20 and ERROR SUMMARY) is the result; the 30 cuTile cases only
      stage tmamemcheck "command -v compute-sanitizer || { echo 'compute-sanitizer is not on PATH'; exit 3; }; \
        CUDNN_CUTILE_SLICE_TMA=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --report-api-errors no \
        --print-limit 20 python3 -m pytest tests/numerics/test_cu_seqlens_safety.py -q -rs \
        -p no:cacheprovider -k cutile"
      stage tmabench1 "CUDNN_CUTILE_SLICE_TMA=1 python3 bench/bench_linear_attention.py \
        --cases 'GDN fwd' --impl cuTile --reps 20"
      stage tmabench0 "CUDNN_CUTILE_SLICE_TMA=0 python3 bench/bench_linear_attention.py \
        --cases 'GDN fwd' --impl cuTile --reps 20" ;;
    guardreads)
      stage guardreads "python3 -m pytest tests/numerics/test_cu_seqlens_safety.py -q -rs \
        -p no:cacheprovider -k read_no_row" ;;
    seqcost)
      stage seqcost "python3 bench/cu_seqlens_cost.py" ;;
    cutilememcheck)   # each case in its own process under memcheck (caching allocator off)
      stage cutilememcheck "command -v compute-sanitizer || { echo 'compute-sanitizer is not on PATH'; exit 3; }; \
        python3 tools/gpu/cutile_memcheck_probe.py --timeout \$(( ${STAGE_TIMEOUT:-300} / 6 ))" ;;
    decode)      # a failed precompile only costs time: the launcher compiles what is missing
      stage decodebuild "python3 tools/gpu/frost_precompile.py --native --jobs \$(nproc) \
        --out .frostcache --suites decode --keep --pack ''"
      [ -d .frostcache ] && export FROST_KERNEL_CACHE="$PWD/.frostcache"
      stage decode "python3 -m pytest tests/numerics/test_la_decode_gpu.py -q -s -p no:cacheprovider"
      stage decodehost "python3 tests/torch_ops/op_overhead.py --serve --device cuda --family gdn \
        --family kda --profile 25"
      stage decodebench "python3 bench/bench_decode.py --tokens 1,4,16" ;;
    decodevec)   # A/B of the decode kernel's variants, both off by default (NOTES_decode.md)
      [ -d .frostcache ] && export FROST_KERNEL_CACHE="$PWD/.frostcache"
      stage decodevectest "FROST_DECODE_VEC=1 python3 -m pytest tests/numerics/test_la_decode_gpu.py \
        -q -p no:cacheprovider"
      stage decodevecbench "for w in 0 1; do for v in 0 1; do FROST_DECODE_VEC=\$v FROST_DECODE_BV64=\$w \
        python3 bench/bench_decode.py --tokens 1,4 --columns op || exit 1; done; done" ;;
    decodehost)  # the cached serving call's host time alone (op_overhead.py --serve)
      [ -d .frostcache ] && export FROST_KERNEL_CACHE="$PWD/.frostcache"
      stage decodehost "python3 tests/torch_ops/op_overhead.py --serve --device cuda --family gdn \
        --family kda --profile 25" ;;
    decodesan)   # the decode bench (op and FLA columns, graph capture included) under
                 # compute-sanitizer memcheck: names the kernel of an illegal access seen in
                 # the FLA graph column without blocking launches (bench/NOTES.md)
      [ -d .frostcache ] && export FROST_KERNEL_CACHE="$PWD/.frostcache"
      stage decodesan "command -v compute-sanitizer || { echo 'compute-sanitizer is not on PATH'; exit 3; }; \
        compute-sanitizer --tool memcheck --report-api-errors no --print-limit 8 --error-exitcode 1 \
        python3 bench/bench_decode.py --no-isolate --batches \${DECODESAN_BATCHES:-256,1024} --tokens 1,4" ;;
    autotune)
      stage autotune "python3 -m pytest tests/numerics/test_la_autotune_gpu.py -q -s \
        -p no:cacheprovider ${AUTOTUNE_ARGS:-}" ;;
    *) echo "unknown stage $s"; exit 2 ;;
  esac
done
printf '%s\n' "--- summary" "${SUMMARY[@]}" | tee "$OUT/summary.log"
