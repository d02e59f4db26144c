// flash_fwd_sm90.cu -- a single-file FlashAttention forward kernel for Hopper (sm_90a).
//
// DESIGN
//   Persistent grid of one CTA per SM. A CTA is 1 producer warpgroup + CWG consumer warpgroups of
//   64 query rows each (tile BM = 64 * CWG). The producer's elected thread takes tiles from a global
//   atomic counter (dynamic scheduling). Causal: sections of (batch, head) pairs whose K/V fit in L2
//   together, the longest m_blocks first inside a section; non-causal: head-major order, so the CTAs
//   at work at one time share the K/V of a few heads in L2. The counters (a ring of them, in static
//   device memory) are never zeroed: a launch adds exactly its number of tiles to its counter, and the
//   host passes the value it starts from. A tile index becomes (m_block, head, batch) without a division
//   instruction: each divisor known at launch comes with a multiplier and a shift from the host (FastDiv;
//   the division sequences cost 1-3% on short rows, NOTES.md runs 100-105), in the producer and the
//   consumers (the causal ones by the product's high word, but d192/128's epilogue, where ptxas would
//   then serialize the wgmmas: there the whole product);
//   the ring's slot carries the tile's m_block beside its index, so a consumer starts its tile without one.
//   The producer announces each tile to the consumers through a two-slot shared-memory ring guarded
//   by mbarriers, and issues TMA loads (cp.async.bulk.tensor, 4-D maps over (headdim, seqlen, heads,
//   batch), so a box never spills into the next head or batch) into swizzled shared memory: Q once
//   per tile (double-buffered where shared memory allows, so the next tile's Q loads during this
//   one; a single buffer of two warpgroups in halves, each loaded and released on its own barriers,
//   so that the warpgroup done first lets the next tile's rows in), K and V through separate
//   STAGES-deep full/empty mbarrier pipelines (on the BN = 80 tiles and the causal 192x112 d96 tile a
//   block's V is issued after the next block's K, as the consumers need them, within a tile); Q and K in
//   64-column chunks with the 128-byte swizzle, V likewise, or in 32-column chunks with the 64-byte
//   swizzle where that avoids padding (d 96). Registers move to the consumers with setmaxnreg
//   (producer 24 and consumers 240 with 2 consumer warpgroups, 32 and 232 at d 256; 32 and 160 with 3).
//   Consumers: S = Q K^T with wgmma SS (K-major); online softmax in the exp2 domain, the scale folded
//   into one FFMA, row statistics reduced across the quad; P converted in registers (the fp32
//   accumulator layout is the bf16 A-operand layout) and O += P V with wgmma RS, V read MN-major.
//   Intra-warpgroup overlap: S(i) and O += P(i-1) V(i-1) are issued back to back, and the softmax of
//   S(i) starts while the PV GEMM is in flight (the fast softmax: the PV wait stays below the
//   warpgroup's vote; the exact step releases K(i) as soon as its S GEMM is done, and ptxas then
//   places the PV wait where it likes: measured faster than holding it below the first row's
//   exponentials, NOTES.md runs 44-46). Ping-pong between warpgroups: the
//   consumer warpgroups take turns to issue their GEMMs (named barriers 1..CWG), so one warpgroup's
//   softmax runs while the tensor cores work for another. The reference the exponentials are taken
//   against is a row max plus a bias of 96 (log2 units), so P starts at 2^-96 and the max may grow by
//   112 (log2; 78 in natural units) before anything must be redone: the kernel's time does not depend
//   on how wide the logits are or how the row max moves on real data. Lazy rescaling: O and the row
//   sums are rescaled only when a block's max passes that window (warp-uniform decision), else the
//   reference stays. The LSE takes the row sums of P as computed; O is normalized by the sums of the
//   PV GEMM's own weights (P rounded to bf16), so that a row that one key dominates gets that key's V
//   as it is. Where the fast softmax runs at d_v <= 96, the tensor cores take them: the PV GEMM runs
//   on N = d_v + 8, over V and the first 8 columns of a chunk of ones after each stage's V (written
//   once, never loaded). Elsewhere the epilogue replaces the largest term of the row sum by that term
//   rounded to bf16, as the PV GEMM took it: recomputed exactly as the softmax computed it, from the
//   row's largest S and the reference, which has not moved since that block (a move puts the new
//   largest S in its own block); in a kernel with the fast softmax each row records its largest P
//   itself instead, against the current reference (rescaled with O): the exact step from its row
//   max, the fast softmax with one 3-input integer max (VIMNMX3) per two P of a block that stands (P >= 0,
//   so its bits order as integers), and the epilogue reduces them across the quad. Fast softmax (steady loop, most
//   configurations): the block's row max is not computed at all; P = exp2(S * scale - reference)
//   straight away, and the block stands if every thread's partial row sums are finite and at most
//   2^16 (so is every P). Otherwise (the max grew by more than 75, or a row saw nothing before) the
//   warpgroup agrees through a named barrier with an OR reduction, issues the block's S GEMM again and
//   takes the exact step; K and Q are released only once the block stands. KV blocks are visited last to first, so the blocks that need a mask
//   (sequence tail, causal diagonal) come first: they run in their own loop and the steady loop has
//   no mask code; causal is a template parameter. A masked block compares each S's column with one
//   limit per row, its last visible column (min(row + diagonal, seqlen_k - 1), relative to the thread's
//   first column, so that the compare is against a constant). Causal, BN = 128, with the fast softmax: a masked
//   block of which a warpgroup's rows see at most the first 64 columns (the diagonal, or a block masked
//   whole for that warpgroup) takes its S GEMM on N = 64 and its softmax on those 64 columns only
//   ("half blocks"). Causal without half blocks, d >= 128: a warpgroup skips the blocks masked whole for its
//   rows (the first ones visited; at least one block stays, so that a row that sees nothing ends in 0
//   and LSE -inf); it still takes its ping-pong turn for each, settles an owed tile in the first, and
//   releases each skipped stage's K and V once they have landed. Each wgmma descriptor is a base built once plus a
//   compile-time offset in its low word. O is never zeroed: a tile's first PV GEMM starts it afresh
//   (scale-d 0). Causal: a tile's last PV GEMM goes to the tensor cores with the next tile's first S
//   GEMM, and its epilogue runs under that tile's first softmax, so the many short tiles of causal
//   attention leave no gap between them (non-causal tiles, and the causal d192/128 128x128 tile whose
//   single Q buffer holds the next tile back, measured faster with the epilogue at once).
//   Where Q has a single buffer, the owed PV GEMM goes to the tensor cores before the next tile's Q
//   has landed, and its S GEMM follows once it has.
//   Causal d128 with 4 or more query heads per K/V head and up to 4096 keys: the producer takes the
//   next tile and loads its Q once this tile's first K/V block is issued, not its last (the short
//   tiles of GQA waited for Q; measured faster there only, NOTES.md runs 49-51 and 53). Other causal
//   tiles up to 1024 (d192/128), 2048 (d64, d128) or 4096 keys (d96), not d256: the producer asks for
//   the next tile at this one's start and takes it once this one's loads are issued (FA3's order).
//   Launches of at most 64 query rows (decoding) take the 128x128 tile (d256 128x80) on the exact
//   step in every block with the reference moved to every new row max (P_LOG2 0): the row's largest P
//   is then exactly 2^-96, FA3's precision on heads of one query row, where the lazy reference rounded
//   it to bf16 and failed 4 of 7,826 draws on LLM-like and wide inputs (NOTES.md, runs 93-94).
//   Rows with nothing to attend give 0 and LSE -inf. Epilogue: where shared memory has room after Q
//   and K/V (every configuration but d256, the 192x112 d96 tile and the 128x128 d192/128 tile), each
//   warpgroup writes its normalized O to its own staging buffer with stmatrix (64-column chunks,
//   128-byte swizzle) and one thread stores it with TMA (bulk groups: the warps go on at once; the
//   buffer is reused once the previous stores have read it); elsewhere each quad transposes its
//   values with shuffles so that every thread writes 16 contiguous bytes, but on the 128x128
//   d192/128 tile, which stages O in the K stage of the tile's last block and stores it with TMA,
//   releasing that stage once the stores have read it. Rows past seqlen_q are clipped by the TMA box
//   or skipped.
//   Tiles (BM x BN, consumer warpgroups, stages; the PV GEMM on N = d_v, + 8 at d64 and d96): d64 192x128 (3, 2), causal
//   with up to 1024 keys 128x128 (2, 2); d96
//   192x112 (3, 2) with seqlen_k >= 2048 (causal: >= 8192), else 128x128 (2, 2); d128 and d192/128 192x80 (3, 2) with
//   long K/V (d128 from 8192 keys, causal from 8192 where Q goes ahead (4 or more query heads per K/V
//   head), else from 4096; d192/128 from 8192), else 128x128 (2, 2); d256 128x80 (2, 2). Three consumer warpgroups need P in at most 160 registers:
//   S (BN/2), O (d_v/2 + 4) and P (BN/4) per thread, hence the narrower BN. The fast softmax runs in
//   every configuration but d256, causal d64 with up to 1024 keys, the non-causal 192-row d96 tile
//   (whose causal kernel takes it without the PV GEMM's sums: at N = 104 they spill), causal d192/128
//   below 1024 keys and on its 192x80 tile (slower there; NOTES.md, runs 53-55). The A/B knobs (KS_*, below the contract) choose other
//   tiles for a variant built beside this one; their defaults are the choices above.
//
// MEASURED STANDING
//   The full grid (182 scenarios beside FA3, FA4 and cuDNN on four input distributions, and the
//   extended correctness set) is in results/sm90/REPORT.md, regenerated by `make reproduce ARCH=sm90`;
//   kernels/hopper/NOTES.md has every version with its prediction and measurement. This version, v42,
//   is v41 with the causal consumers' divisions as multiplies too (the epilogue's (m_block, head, batch)
//   by the product's high word, KS_FAST_DIV=3) and m_block carried by the tile ring (KS_TILE_RING=1):
//   beside v41 on an H100 (2026-12-07, runs 105 and 108) 1.010x over 18 rows and 1.007-1.008x over 14,
//   1.015-1.026x on causal d64; its whole grid on an H100 (run 106): 1.0496x FA3, 1.088x FA4 on the worst
//   input distribution, every output correct on four distributions, no row below 0.95x FA3 (not yet
//   measured on the H200; results/sm90/ is still v34's H200 grid). v41 (v40 with the
//   scheduler's divisions by launch-time values as a multiply and a shift, FastDiv, in the producer and
//   the non-causal consumers) beside v40's divisions on an H100 (runs 101-103) 1.013x over 17 rows and
//   1.007x over 15 others; its whole grid on an H100 (run 104): 1.043x FA3, 1.081x FA4 on the worst input
//   distribution, all correct, no row below 0.95x FA3. v40 is v39 with decoding launches on the
//   exact step (below); v39
//   (v34 with the reference's bias 96, the next tile taken at a tile's start on short causal tiles,
//   K one block ahead of V on the BN = 80 tiles and the causal 192x112 d96 tile, O of the d192/128
//   128x128 tile through a K stage, and a single Q buffer in halves) puts together what runs 63-82
//   measured one by one on H100s beside v34-v37: the bias 1.006-1.007x on wide inputs; the early take
//   1.2-2.6% on causal rows up to 1024 keys; K ahead 1.013-1.023x on d128 and d192/128 from 8192 keys
//   and 1.017-1.029x on causal d96 from 8192; O through a K stage 1.015-1.021x on causal d192/128 at
//   512-2048 keys; Q in halves 1.005-1.019x on causal d192/128 and d256 at 512-1024 keys. The same
//   changes on v37's base, as v38, measured on an H100 (run 83): 1.037x FA3, 1.073x FA4 on the worst
//   distribution, no row below 0.95x FA3. v39 itself beside v34, on an H100 (2026-12-06, A/B run 88,
//   16 rows): 1.012x on standard inputs, 1.015x on wide ones (d192v128-h16kv16-s512-causal 1.042x;
//   v34 0.9% faster on standard d128-h16kv16-s2048-causal only); correct on all 498 scenarios on four
//   input distributions (runs 89-90, 1992 checks) and on the GPU tests. Its decoding launches on the
//   exact step (KS_DECODE_EXACT, on an H100, 2026-12-07, run 94): 0 of 7,826 draws of the 13 one-query-row
//   cases failed (llm and wide, 301 seeds), against 4 with the lazy reference; its largest error over
//   tolerance per case equals FA3's in 21 of 26 cases (largest 0.939, FA3's too); extended set 316/316.
//   Their speed (run 98, H100, six decoding shapes, outside the timed grid): 1.43x v39 with groups of
//   query heads per K/V head (v39 took 192-row tiles there), 1.13x on d64, level elsewhere; FA3 is 2.1x
//   this version on those groups (it puts the rows of a group's query heads in one tile; each of ours
//   holds one head's rows) and level or slower without them. This version's whole grid on an H100 (run 95):
//   1.037x FA3, 1.075x FA4 on the worst distribution, every scenario correct. Before it,
//   v34 (v33 with one compare per S in a masked block, and non-causal d128 on 128x128 up to 8192 keys),
//   on an H100 (2026-12-06, A/B runs 58-59, wide and LLM-like inputs, every output checked): the mask
//   1.004-1.012x v33 on causal rows up to 2048 keys of every head size; the threshold 1.042-1.045x on
//   d128-h16kv16-s4096 (1.005-1.026x with 1-4 K/V heads); correct on all 498 scenarios on four input
//   distributions (1992 checks) and on the GPU tests. Not kept there: d128 non-causal on 128x128 at 8192
//   keys (0.94-0.98x), causal GQA d128 on 128x128 at 8192 (0.95x), d96 thresholds either way (0.87-0.98x),
//   causal d64 on 128x128 at 2048 keys (0.88x). v33's whole grid (run 57, H100, `reproduce`, four
//   distributions): 1.027x FA3, 1.066x FA4, 1.140x cuDNN on the worst.
//   v32 (v31 with the fast softmax's record of each row's largest term taken on P with one VIMNMX3 per
//   two P; Q ahead from 4 query heads per K/V head; the fast softmax on causal d192/128 128x128 tiles
//   from 1024 keys and on the causal 192x112 d96 tile), on an H100 (2026-12-06, A/B run 55, the whole
//   grid beside v31 and FA3, wide inputs, every output checked): 1.006x v31 (causal d128 1.028x,
//   non-causal d192/128 1.014x), 1.027x FA3 (v31 1.020x in the same run); correct on all 498 scenarios
//   on four input distributions (1992 checks) and on the GPU tests.
//   Its tile thresholds then (A/B run 56, H100, wide and LLM-like inputs): non-causal d128 on 128x128 up
//   to 4096 keys (was 2048) 1.038-1.042x at 2048 keys; non-causal d192/128 up to 8192 (was 4096)
//   1.018-1.029x at 4096; causal d128 with one query head per K/V head on 192x80 from 4096 (was 8192)
//   1.019x at 4096 (with 4 or 16 query heads per K/V head 0.993-0.997x: they keep 8192).
//   v31 (v30 with Q taken ahead on causal d128 GQA up to 4096 keys), on an H100 (2026-12-06, A/B run
//   51, three copies of v30 beside it, wide and LLM-like inputs): 1.014-1.022x v30 on causal d128 with
//   one or two K/V heads from 1024 to 4096 keys, 0.991-0.994x from 8192 keys (run 50), the other rows as v30.
//   v30 (v28c with K released as soon as the exact step's S GEMM is done), on an H100 (2026-12-06,
//   A/B run 46, wide and LLM-like inputs): 1.007-1.028x v28c on causal d64 up to 1024 keys and
//   1.010-1.021x on d96 from 8192 keys (the tiles that take the exact step whole), within 0.7% of it
//   elsewhere; correct on all 498 scenarios on four input distributions (1992 checks) and on the GPU
//   tests; on the whole grid with wide inputs beside FA3 (run 48, H100) 1.023x FA3, d128 0.995x (causal
//   0.973x), 4 rows below 0.95x (d128 causal with one K/V head, d192/128 s512 causal: 0.936-0.942x).
//   v28c, on an H100 (2026-12-05): 1.013x v25 (A/B run 33, 17 rows of every kind of tile, wide
//   inputs), 1.007x FA3 on the same rows (A/B run 34), where FA3 still leads on causal d192/128 s512
//   (0.94x), causal d128 s2048 (0.96x) and long d96 (0.96x); correct on all 498 scenarios (the grid
//   and the extended set) on four input distributions, 1992 checks, and on the rows one key
//   dominates (run 35). v25 (A/B run 31, H100): 1.022x v23, whose full grid on an H100 (run 30, four
//   distributions) read 0.993x FA3, 1.027x FA4.
//
// Implements the kernelseek-suite kernel contract (ABI 1): see the README, "The kernel contract".
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>

// ------------------------------------------------------------------------------ the contract
#define KS_ABI_VERSION 1
#define KS_OK 0
#define KS_ERR_UNSUPPORTED 1
#define KS_ERR_INVALID 2
#define KS_ERR_CUDA 3

typedef struct {
  const void *q, *k, *v;
  void *out;
  float *lse;
  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  int64_t o_batch_stride, o_seq_stride, o_head_stride;
  int64_t lse_batch_stride, lse_head_stride;
  int32_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, d_qk, d_v;
  int32_t causal;
  float softmax_scale;
  int32_t dtype;
} ks_attn_params;

// ------------------------------------------------------------------------------ A/B knobs
// Compile-time choices for A/B runs (a variant is this file with a #define before it); the defaults are
// the measured choice (kernels/hopper/NOTES.md).
#ifndef KS_D128_WIDE_PV  // d128's 192x80 tile with the sums of P in its PV GEMM (N = 136, V in 32-column
#define KS_D128_WIDE_PV 0  // chunks): 0 nowhere, 1 causal, 2 causal and non-causal
#endif
#ifndef KS_D128_WIDE_SHORT  // 1: d128's 128x128 tile with the sums of P in its PV GEMM as well (N = 136; no
#define KS_D128_WIDE_SHORT 0  // half blocks then, and O written from registers: shared memory is full)
#endif
#ifndef KS_D128_CAUSAL_LONG_FROM  // keys from which causal d128 takes the 192x80 tile (else 128x128)
#define KS_D128_CAUSAL_LONG_FROM 8192
#endif
#ifndef KS_D128_CAUSAL_LONG_FROM_MHA  // the same with fewer query heads per K/V head than Q ahead asks for
#define KS_D128_CAUSAL_LONG_FROM_MHA 4096
#endif
#ifndef KS_D192_CAUSAL_LONG_FROM  // keys from which causal d192/128 takes the 192x80 tile (else 128x128)
#define KS_D192_CAUSAL_LONG_FROM 8192
#endif
#ifndef KS_D128_LONG_FROM  // keys from which non-causal d128 takes the 192x80 tile (else 128x128)
#define KS_D128_LONG_FROM 8192
#endif
#ifndef KS_D192_LONG_FROM  // keys from which non-causal d192/128 takes the 192x80 tile (else 128x128)
#define KS_D192_LONG_FROM 8192
#endif
#ifndef KS_D96_LONG_FROM  // keys from which non-causal d96 takes the 192x112 tile (else 128x128)
#define KS_D96_LONG_FROM 2048
#endif
#ifndef KS_D96_CAUSAL_LONG_FROM  // the same for causal d96
#define KS_D96_CAUSAL_LONG_FROM 8192
#endif
#ifndef KS_D64_CAUSAL_SHORT_TO  // causal d64 up to this many keys on the two-warpgroup 128x128 tile (else 192x128)
#define KS_D64_CAUSAL_SHORT_TO 1024
#endif
#ifndef KS_D128_FAST  // where d128's tiles (but the wide one) take the fast softmax: 3 everywhere, 1 non-causal
#define KS_D128_FAST 3  // only, 0 nowhere (the exact step, whose K may go early: KS_K_RELEASE)
#endif
#ifndef KS_Q_AHEAD  // 1: with two Q buffers, the producer takes the next tile and loads its Q right after the
#define KS_Q_AHEAD 4  // first K/V block of this one (0: once this tile's K/V loads are all issued; 2: as 1,
#endif                // causal with 8 or more query heads per K/V head only; 3: as 2, d128 only;
                      // 4: as 3, up to 4096 keys)
#ifndef KS_K_STAGES  // K stages of the two-warpgroup tiles where shared memory allows (0: as many as V's)
#define KS_K_STAGES 0
#endif
#ifndef KS_TOP_P  // the fast softmax's record of each row's largest term: 0 its largest S (one FMNMX per S), 1
#define KS_TOP_P 3  // its largest P as computed (one 3-input integer max, VIMNMX3, per two P: P >= 0); 2: as 1,
#endif                // and so at d64 and d96 too, instead of the PV GEMM's sums (N = d_v + 8); 3: as 1, and so
                      // on the 192-row d96 tile (whose PV GEMM on N = 104 spills)
#ifndef KS_D192_FAST  // where d192/128's tiles take the fast softmax (FastSoftmax: 1 non-causal only, 3 everywhere)
#define KS_D192_FAST 1
#endif
#ifndef KS_D192_CAUSAL_FAST_FROM  // keys from which causal d192/128's 128x128 tile takes the fast softmax
#define KS_D192_CAUSAL_FAST_FROM 1024
#endif
#ifndef KS_D256_FAST  // the same for d256 (0 nowhere)
#define KS_D256_FAST 0
#endif
#ifndef KS_D96_LONG_FAST  // the same for d96's 192x112 tile (2: causal only)
#define KS_D96_LONG_FAST 2
#endif
#ifndef KS_Q_AHEAD_MIN_GROUP  // KS_Q_AHEAD 2-4: Q ahead from this many query heads per K/V head
#define KS_Q_AHEAD_MIN_GROUP 4
#endif
#ifndef KS_MASK_LIMIT  // 1: a masked block tests each S against one per-row limit, min(row + diag, seqlen_k - 1)
#define KS_MASK_LIMIT 1  // (the same columns); 0: col >= seqlen_k and col > row + diag apart
#endif
#ifndef KS_Q_PREFETCH  // 1: where Q is not taken ahead and has one buffer, the producer takes the next tile at
#define KS_Q_PREFETCH 4  // this one's start and prefetches its Q into L2; 2: the same with two Q buffers too;
#endif                   // 3: the next tile taken at this one's start, no prefetch; 4: as 3 on causal tiles
                         // up to Config::TAKE_EARLY_TO keys only
#ifndef KS_K_RELEASE  // when a block's K is released: 0 after its softmax; 1 as soon as its S GEMM is done
#define KS_K_RELEASE 1  // in the exact softmax; 2 there and in the fast one too (a timing probe only: a redo
#endif                  // of the fast softmax then reads a K stage that may be loading again)
#ifndef KS_REF_BIAS  // the bias of the reference the exponentials are taken against (log2 units; REF_BIAS below)
#define KS_REF_BIAS 96
#endif
#ifndef KS_K_AHEAD  // 3: the producer issues a block's V after the next block's K (K(0), K(1), V(0), K(2), ...),
#define KS_K_AHEAD 4  // so that K(i + 1) does not queue behind V(i)'s stage wait, on the BN = 80 tiles; 4: as 3,
#endif                // and on the causal 192x112 d96 tile; 5: as 4, and on the causal d128 128x128 tile; 0: each
                      // block's K and V together
#ifndef KS_O_IN_K  // 1: the 128x128 d192/128 tile (no room for O) writes O into the K stage of the tile's last
#define KS_O_IN_K 1  // block and stores it with TMA, releasing that stage once the stores have read it
#endif
#ifndef KS_Q_SPLIT  // 1: a single Q buffer of two consumer warpgroups (Config::Q_STAGES 1: d192/128 128x128,
#define KS_Q_SPLIT 1  // d256) loaded and released in halves, each with its own barriers: a warpgroup done with
#endif                // its rows lets the next tile's load into them
#ifndef KS_PROBE  // a timing probe only, its outputs wrong: 3 the two-warpgroup tiles' loops without their QK
#define KS_PROBE 0  // GEMM (S keeps the last block's P), to see where the time goes (NOTES.md, run 92; without the
#endif              // exponentials or most of the PV GEMM, ptxas serialized the wgmmas: not kept)
#ifndef KS_DECODE_EXACT  // 1: a launch of at most KS_DECODE_ROWS query rows takes the exact step on every block,
#define KS_DECODE_EXACT 1  // its reference moved to each new row max (the row's largest P then exactly
#endif                     // 2^-REF_BIAS, FA3's precision on one-row heads: NOTES.md, run 93), on a two-warpgroup tile
#ifndef KS_DECODE_ROWS
#define KS_DECODE_ROWS 64
#endif
#ifndef KS_FAST_DIV  // 1: the producer's divisions by launch-time values (a tile index into section, head and
#define KS_FAST_DIV 3  // batch; a head into its K/V head) as a multiply and a shift with constants the host
#endif                 // computes (FastDiv); 2: the non-causal consumers' too; 3: as 2, and the causal consumers'
                       // with the product's high word alone (fast_quot32; d192/128's epilogue with the whole
                       // product); 0: the division sequences
#ifndef KS_TILE_RING  // 1: the tile ring's slot carries the tile's m_block beside its index, so that a consumer
#define KS_TILE_RING 1  // starts its tile without dividing (the producer has the quotient already); 0: the index
#endif                  // alone, the consumer recomputes m_block from it

// ------------------------------------------------------------------------------ PTX wrappers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// mbarriers
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// count arrivals at once (one thread arriving for several warps)
__device__ __forceinline__ void mbar_arrive(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// TMA: a 4-D box from global memory into shared memory, completing on an mbarrier
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// TMA: a 4-D box from global memory into L2 only (no shared memory, no barrier), for a load soon after
__device__ __forceinline__ void tma_prefetch_4d(const CUtensorMap* map, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// TMA: a 4-D box from shared memory to global memory (a bulk group; parts of the box outside the
// tensor are not written)
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// the committed bulk stores have read their shared memory (.read) / are complete
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// four 8x8 bf16 matrices to shared memory, each thread holding a pair of one row of each (the
// wgmma accumulator layout); thread i gives the address of row i % 8 of matrix i / 8
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// register reallocation between warpgroups
template <int N> __device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// wgmma bookkeeping
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// keep the compiler from moving accumulator reads/writes across a wgmma wait
template <int N> __device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// shared memory matrix descriptor, 128-byte swizzle (layout type 1 in bits 62-63)
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// named barriers (bar.sync / bar.arrive) among the consumer warpgroups; id 0 is __syncthreads
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// a quad's 4x4 block of 32-bit values transposed: afterwards lane q of the quad holds, in m[0..3], the
// element q of lanes 0..3 (two exchanges through shuffles, each swapping 2x2 sub-blocks)
__device__ __forceinline__ void quad_transpose(uint32_t (&m)[4], int lane) {
  const bool odd = lane & 1, hi = lane & 2;
  uint32_t r = __shfl_xor_sync(0xffffffff, odd ? m[0] : m[1], 1);
  if (odd) m[0] = r; else m[1] = r;
  r = __shfl_xor_sync(0xffffffff, odd ? m[2] : m[3], 1);
  if (odd) m[2] = r; else m[3] = r;
  r = __shfl_xor_sync(0xffffffff, hi ? m[0] : m[2], 2);
  if (hi) m[0] = r; else m[2] = r;
  r = __shfl_xor_sync(0xffffffff, hi ? m[1] : m[3], 2);
  if (hi) m[1] = r; else m[3] = r;
}

// OR of a predicate over the 128 threads of a warpgroup (a named barrier with a reduction)
__device__ __forceinline__ bool warpgroup_any(int id, bool pred) {
  uint32_t r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbarrier.cta.red.or.pred q, %2, 128, p;\nselp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r) : "r"(static_cast<uint32_t>(pred)), "r"(id) : "memory");
  return __any_sync(0xffffffff, r != 0);  // the same value, but warp-uniform in ptxas' eyes (else it spills)
}

// wgmma.mma_async m64nNk16, bf16 inputs, fp32 accumulators; one specialization per N (they differ
// only in the length of the accumulator list).
template <int N> struct Wgmma;
template <> struct Wgmma<72> {
  // D(64x72, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x72, smem, MN-major): V and a
  // chunk of ones beside it (WIDE_PV)
  __device__ static __forceinline__ void rs(float (&d)[36], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35"
        "}, {%36, %37, %38, %39}, %40, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};
template <> struct Wgmma<104> {
  // D(64x104, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x104, smem, MN-major): V and a
  // chunk of ones beside it (WIDE_PV)
  __device__ static __forceinline__ void rs(float (&d)[52], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %57, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n104k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51"
        "}, {%52, %53, %54, %55}, %56, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};
template <> struct Wgmma<136> {
  // D(64x136, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x136, smem, MN-major): V and a
  // chunk of ones beside it (WIDE_PV at d_v 128, WIDE_128_)
  __device__ static __forceinline__ void rs(float (&d)[68], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %73, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n136k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67"
        "}, {%68, %69, %70, %71}, %72, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};
template <> struct Wgmma<64> {
  // D(64x64, f32) = (accumulate ? D : 0) + A(64x16, smem, K-major) * B(16x64, smem, K-major)
  __device__ static __forceinline__ void ss(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // D(64x64, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x64, smem, MN-major)
  __device__ static __forceinline__ void rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};

template <> struct Wgmma<80> {
  // D(64x80, f32) = (accumulate ? D : 0) + A(64x16, smem, K-major) * B(16x80, smem, K-major)
  __device__ static __forceinline__ void ss(float (&d)[40], uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39"
        "}, %40, %41, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // D(64x80, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x80, smem, MN-major)
  __device__ static __forceinline__ void rs(float (&d)[40], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39"
        "}, {%40, %41, %42, %43}, %44, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};

template <> struct Wgmma<96> {
  // D(64x96, f32) = (accumulate ? D : 0) + A(64x16, smem, K-major) * B(16x96, smem, K-major)
  __device__ static __forceinline__ void ss(float (&d)[48], uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
        "}, %48, %49, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // D(64x96, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x96, smem, MN-major)
  __device__ static __forceinline__ void rs(float (&d)[48], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
        "}, {%48, %49, %50, %51}, %52, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};

template <> struct Wgmma<112> {
  // D(64x112, f32) = (accumulate ? D : 0) + A(64x16, smem, K-major) * B(16x112, smem, K-major)
  __device__ static __forceinline__ void ss(float (&d)[56], uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55"
        "}, %56, %57, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // D(64x112, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x112, smem, MN-major)
  __device__ static __forceinline__ void rs(float (&d)[56], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %61, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55"
        "}, {%56, %57, %58, %59}, %60, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};

template <> struct Wgmma<128> {
  // D(64x128, f32) = (accumulate ? D : 0) + A(64x16, smem, K-major) * B(16x128, smem, K-major)
  __device__ static __forceinline__ void ss(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // D(64x128, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x128, smem, MN-major)
  __device__ static __forceinline__ void rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};

template <> struct Wgmma<256> {
  // D(64x256, f32) = (accumulate ? D : 0) + A(64x16, smem, K-major) * B(16x256, smem, K-major)
  __device__ static __forceinline__ void ss(float (&d)[128], uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // D(64x256, f32) = (accumulate ? D : 0) + A(64x16, registers) * B(16x256, smem, MN-major)
  __device__ static __forceinline__ void rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};


// ------------------------------------------------------------------------------ configuration
// where the steady loop takes the fast softmax (softmax_fast): never, in the non-causal kernel only, or in both
enum FastSoftmax { FAST_NEVER = 0, FAST_NON_CAUSAL = 1, FAST_ALWAYS = 3 };

// The exponentials are taken against a reference (row_max): a row max of an earlier block plus
// REF_BIAS in log2 units. A row's P starts at or below 2^-REF_BIAS and may grow up to 2^P_LOG2 before
// O must be rescaled: the max may grow by REF_BIAS + P_LOG2 (112 with the default bias of 96, 78 in
// natural units; 80 with 64) past the block
// that set the reference. Real logits move less than that within a row (a range of tens), so on such
// data neither the lazy rescale nor the fast softmax's redo runs after a row's first block, and a
// wide or growing row max costs nothing (kernels/hopper/NOTES.md, v20: A/B runs 25-26). P <= 2^16 is
// the bound the kernel always had (a bias of 64 with P up to 2^64 measured wrong results on the
// H200, run 26), and a value flushed to 0 (below 2^-126, so more than 126 - REF_BIAS below the
// reference, which is at most the row max: 30 with 96) weighs less than 2^-30 of the largest P. The LSE needs no
// correction: row_max * scale + log(row_sum) counts the bias twice, with opposite signs.
constexpr float REF_BIAS = KS_REF_BIAS;
constexpr int P_LOG2 = 16;

template <int DQK_, int DV_, int BN_, int STAGES_, int CWG_ = 2, int RESCALE_LOG2_ = P_LOG2, int FAST_ = FAST_ALWAYS,
          bool WIDE_128_ = false>
struct Config {
  static constexpr int DQK = DQK_, DV = DV_;
  // lazy O rescale: when a block's max exceeds the reference by more than this (log2 units; 0: every
  // block), so P stays <= 2^RESCALE_LOG2 (the window above)
  static constexpr float RESCALE_LOG2 = RESCALE_LOG2_;
  static_assert(RESCALE_LOG2_ <= P_LOG2, "P must stay within the reference's window");
  static constexpr int DQK_PAD = (DQK + 63) / 64 * 64;  // Q and K: 64-column chunks, 128-byte swizzle
  // V: 64-column chunks with the 128-byte swizzle, or 32-column chunks with the 64-byte swizzle when
  // that avoids padding (d 96): the PV GEMM then runs on N = DV_MMA columns, no more
  // (WIDE_128_: 32-column chunks at d_v 128 too, so that the PV GEMM can take 8 columns of ones after V)
  static constexpr int V_COLS = DV % 64 == 0 && !WIDE_128_ ? 64 : 32;
  static_assert(!WIDE_128_ || (DV == 128 && FAST_ != FAST_NEVER), "WIDE_128_: d_v 128 with the fast softmax");
  static constexpr int DV_MMA = (DV + V_COLS - 1) / V_COLS * V_COLS;
  static constexpr int QK_CHUNKS = DQK_PAD / 64, V_CHUNKS = DV_MMA / V_COLS;
  // the steady loop's softmax against the reference max, redone exactly when unsafe (softmax_fast)
  template <bool CAUSAL> static constexpr bool FAST_SOFTMAX = (FAST_ & (CAUSAL ? 2 : 1)) != 0;
  // KS_Q_PREFETCH 4: causal tiles up to this many keys take their next tile at their start (0: never)
  static constexpr int TAKE_EARLY_TO = DQK == 64 || DQK == 128 ? 2048 : DQK == 96 ? 4096 : DQK == 192 ? 1024 : 0;
  static constexpr int CWG = CWG_;                      // consumer warpgroups, 64 rows each
  static constexpr int PROBE = CWG == 2 ? KS_PROBE : 0;  // the timing probe (KS_PROBE)
  static constexpr int BM = 64 * CWG, BN = BN_, STAGES = STAGES_;
  static constexpr int QK_STEPS = DQK / 16;             // k16 steps of S = Q K^T (real columns only)
  static constexpr int PV_STEPS = BN / 16;
  static constexpr int Q_BYTES = BM * DQK_PAD * 2;
  static constexpr int K_BYTES = BN * DQK_PAD * 2;      // one stage
  static constexpr int V_BYTES = BN * DV_MMA * 2;
  // WIDE_PV (d_v <= 96, or 128 with WIDE_128_; fast softmax): the PV GEMM runs on N = DV_MMA + 8 over V
  // and the first 8 columns of a chunk of ones after it in each stage (never loaded), so the sums of its
  // weights come with it; elsewhere the epilogue corrects the row sum of P by its largest term
  static constexpr bool WIDE_PV =
      ((DV_MMA <= 96 && KS_TOP_P != 2 && !(KS_TOP_P == 3 && BN_ == 112)) || WIDE_128_) && FAST_ != FAST_NEVER;
  static constexpr int V_STAGE_BYTES = V_BYTES + (WIDE_PV ? BN * V_COLS * 2 : 0);
  // Q double-buffered where shared memory allows: the next tile's Q loads while this tile runs
  // K's stages: more than V's (KS_K_STAGES) on the two-warpgroup tiles where one Q buffer leaves room
  static constexpr int K_STAGES =
      CWG == 2 && KS_K_STAGES > STAGES && Q_BYTES + KS_K_STAGES * K_BYTES + STAGES * V_STAGE_BYTES + 512 + 1024 <= 232448
          ? KS_K_STAGES : STAGES;
  static constexpr int KV_BYTES = K_STAGES * K_BYTES + STAGES * V_STAGE_BYTES;  // K's and V's stages
  static constexpr int Q_STAGES = 2 * Q_BYTES + KV_BYTES + 512 + 1024 <= 232448 ? 2 : 1;
  // KS_Q_SPLIT: a single Q buffer in parts, consumer warpgroup w's 64 rows of each chunk, each part with its
  // own full and empty barriers
  static constexpr int Q_SPLIT = Q_STAGES == 1 && CWG == 2 ? KS_Q_SPLIT : 0;
  // O staged in shared memory (64-column chunks, 128-byte swizzle) and written by TMA stores, where
  // shared memory allows after Q and K/V; elsewhere it is written from registers
  static constexpr int DV_PAD = (DV + 63) / 64 * 64;
  static constexpr int O_BYTES = BM * DV_PAD * 2;
  static constexpr bool O_TMA = Q_STAGES * Q_BYTES + KV_BYTES + O_BYTES + 512 + 1024 <= 232448;
  static constexpr int TILE_BYTES = Q_STAGES * Q_BYTES + KV_BYTES + (O_TMA ? O_BYTES : 0);
  // after the tiles: the barriers (256 bytes, of 512 set aside), and slack for the 1024-byte alignment
  static constexpr int SMEM_BYTES = TILE_BYTES + 512 + 1024;
  static_assert(8 * (8 + 2 * K_STAGES + 2 * STAGES + (Q_SPLIT ? 2 * CWG : 0)) <= 256, "barrier area");
  // O's accumulators (d_v / 2 per thread), then with WIDE_PV 4 more: the PV GEMM's weights summed per
  // row (row a twice, row b twice: its last 8 columns, whose B is all ones)
  static constexpr int O_REGS = DV_MMA / 2 + (WIDE_PV ? 4 : 0);
  static constexpr int THREADS = 128 * (CWG + 1);
  static constexpr int CONSUMER_WARPS = 4 * CWG;
  // registers per thread after setmaxnreg: the producer gives its share to the consumers
  // setmaxnreg.inc only draws on what the CTA was launched with (65536 / THREADS, rounded down to a
  // multiple of 8, per thread) and what the producer gave back: ask for more and it waits forever
  static constexpr int REGS_AT_LAUNCH = (65536 / THREADS) / 8 * 8;
  static constexpr int REGS_PRODUCER = CWG == 2 ? (DV >= 256 ? 32 : 24) : 32, REGS_CONSUMER = CWG == 2 ? (DV >= 256 ? 232 : 240) : 160;
  static_assert(REGS_PRODUCER * 128 + REGS_CONSUMER * 128 * CWG <= REGS_AT_LAUNCH * THREADS, "register budget");
  static_assert(BN % 16 == 0 && BN <= 256, "BN");
  static_assert(SMEM_BYTES <= 232448, "shared memory budget of an sm90 CTA");
};

// the dynamic scheduler's tile counters: a ring, so launches in flight on different streams do not
// share one. They start at zero with the module and only grow: a launch adds exactly its number of
// tiles to its counter (each CTA's last atomicAdd is the one that finds no tile left), so the host
// knows where the next launch on that counter starts, and nothing is zeroed between launches
// (unsigned arithmetic: wrapping around is harmless)
constexpr int TILE_COUNTERS = 64;
__device__ unsigned tile_counters[TILE_COUNTERS];
static unsigned tile_counter_base[TILE_COUNTERS];
static unsigned next_tile_counter = 0;

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31 as (n * m) >> (31 + s), with s = ceil(log2 d) and m = ceil(2^(31+s) / d)
// (< 2^32): n m / 2^(31+s) = n / d + n e / (d 2^(31+s)) with 0 <= e < d, and that second term is below
// 2^31 / 2^(31+s) <= 1 / d, too little to reach the next integer
struct FastDiv {
  uint32_t m, s;
  int d;
};
static FastDiv fast_div(int d) {
  uint32_t s = 0;
  while ((1ull << s) < (unsigned long long)d) ++s;
  return FastDiv{(uint32_t)(((1ull << (31 + s)) + (unsigned long long)d - 1) / (unsigned long long)d), s, d};
}
__host__ __device__ __forceinline__ int fast_quot(int n, const FastDiv& f) {
  return static_cast<int>((static_cast<unsigned long long>(static_cast<uint32_t>(n)) * f.m) >> (31 + f.s));
}
// the same quotient from the high word of the product alone (n m >> (31 + s) = hi(n m) >> (s - 1) for s >= 1;
// n itself for d = 1): a 32-bit multiply, where the 64-bit product's second register costs (KS_FAST_DIV 3)
__host__ __device__ __forceinline__ uint32_t mul_hi(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<unsigned long long>(a) * b) >> 32);
#endif
}
__host__ __device__ __forceinline__ int fast_quot32(int n, const FastDiv& f) {
  return f.s ? static_cast<int>(mul_hi(static_cast<uint32_t>(n), f.m) >> (f.s - 1)) : n;
}

struct DeviceParams {
  __nv_bfloat16* out;
  float* lse;
  int64_t o_batch_stride, o_seq_stride, o_head_stride;
  int64_t lse_batch_stride, lse_head_stride;
  int seqlen_q, seqlen_k, heads_q, group, batch;  // group = heads_q / heads_kv
  int causal, m_blocks;
  int section;        // (batch, head) pairs whose tiles are scheduled together (their K/V share L2)
  int tile_slot;        // dynamic scheduler: the counter this launch takes its tiles from (tile_counters)
  unsigned tile_offset;  // the grid size minus the counter's value when this launch starts
  float scale, scale_log2;
  FastDiv div_per_section, div_section, div_heads, div_group;  // KS_FAST_DIV: by section * m_blocks, section, heads_q, group
};

// ------------------------------------------------------------------------------ the kernel
// Tiles are (m_block, head, batch) triples, handed out dynamically: a CTA takes the next tile
// index from a global atomic counter. Tile indices run over sections of `section` (batch, head)
// pairs whose K/V fit in L2 together; inside a section the longest (causal) m_blocks come first.
struct Tile {
  int m_block, h, b;
};
// FAST_DIV 0: division sequences; 1: FastDiv's 64-bit product; 2: its high word (fast_quot32)
template <int FAST_DIV = 0>
__device__ __forceinline__ Tile tile_at(int t, const DeviceParams& p) {
  if constexpr (FAST_DIV != 0) {
    auto quot = [](int n, const FastDiv& f) { return FAST_DIV == 2 ? fast_quot32(n, f) : fast_quot(n, f); };
    const int sec = quot(t, p.div_per_section), r = t - sec * p.div_per_section.d;
    const int rq = quot(r, p.div_section), bh = sec * p.section + (r - rq * p.section);
    const int b = quot(bh, p.div_heads);
    return Tile{p.m_blocks - 1 - rq, bh - b * p.heads_q, b};
  }
  const int per_section = p.section * p.m_blocks;
  const int sec = t / per_section, r = t % per_section;
  const int bh = sec * p.section + r % p.section;
  return Tile{p.m_blocks - 1 - r / p.section, bh % p.heads_q, bh / p.heads_q};
}
// the producer's form of tile_at (KS_FAST_DIV)
constexpr int PRODUCER_DIV = KS_FAST_DIV ? 1 : 0;
// the K/V head of query head h (the producer's: KS_FAST_DIV)
__device__ __forceinline__ int kv_head(int h, const DeviceParams& p) {
  return KS_FAST_DIV ? fast_quot(h, p.div_group) : h / p.group;
}

// wgmma shared-memory descriptors: only the address field (bits 0-13, address >> 4) varies, so a
// descriptor is the 16-byte-unit base of its operand plus a compile-time offset in the low word,
// and a compile-time high word (SBO, swizzle mode). The address field never carries: shared
// memory is under 256 KB.
template <uint32_t LBO, uint32_t SBO, uint32_t SWIZZLE = 128>
__device__ __forceinline__ uint64_t desc_at(uint32_t base16, uint32_t off_bytes) {
  const uint32_t lo = base16 + (off_bytes >> 4) + ((LBO >> 4) << 16);
  constexpr uint32_t mode = SWIZZLE == 128 ? 1u : 2u;  // bits 62-63: 1 = 128-byte, 2 = 64-byte swizzle
  constexpr uint32_t hi = (SBO >> 4) | (mode << 30);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

template <class C, bool CAUSAL>
__device__ __forceinline__ int kv_blocks(int m0, const DeviceParams& p) {
  const int n_end = CAUSAL ? min(p.seqlen_k, m0 + C::BM + p.seqlen_k - p.seqlen_q) : p.seqlen_k;
  return n_end > 0 ? (n_end + C::BN - 1) / C::BN : 0;
}

template <class C, bool CAUSAL, int NJ = C::BN / 8>
__device__ __forceinline__ void mask_scores(float (&acc_s)[C::BN / 2], int n0, int row_a, int row_b, int col_lane,
                                            int diag, const DeviceParams& p) {
  if constexpr (KS_MASK_LIMIT == 1) {
    // each row's last visible column, relative to this thread's first: one compare per S against a constant
    const int last = p.seqlen_k - 1 - n0 - col_lane;
    const int lim[2] = {CAUSAL ? min(row_a + diag - n0 - col_lane, last) : last,
                        CAUSAL ? min(row_b + diag - n0 - col_lane, last) : last};
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (j * 8 + (e & 1) > lim[e / 2]) acc_s[j * 4 + e] = -INFINITY;
    }
  } else {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n0 + j * 8 + col_lane + (e & 1);
        const int row = e < 2 ? row_a : row_b;
        if (col >= p.seqlen_k || (CAUSAL && col > row + diag)) acc_s[j * 4 + e] = -INFINITY;
      }
    }
  }
}

// P = exp2(S * scale_log2 + neg[row]) in place over the first NJ column groups, and each row's sum of
// them added to sum[row], through four partial sums per row (short dependency chains)
template <class C, int NJ = C::BN / 8>
__device__ __forceinline__ void exp_and_sum(float (&acc_s)[C::BN / 2], const float (&neg)[2], float scale_log2,
                                            float (&sum)[2], float* top = nullptr, int* top_p = nullptr) {
  float part[2][4] = {{sum[0], 0.f, 0.f, 0.f}, {sum[1], 0.f, 0.f, 0.f}};
  int pmax[2] = {0, 0};  // top_p: each row's largest P as bits (P >= 0, so ordered as integers)
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (top != nullptr) top[e / 2] = fmaxf(top[e / 2], acc_s[j * 4 + e]);  // this thread's largest S
      const float v = exp2f(fmaf(acc_s[j * 4 + e], scale_log2, neg[e / 2]));
      acc_s[j * 4 + e] = v;
      part[e / 2][(e & 1) + 2 * (j & 1)] += v;
    }
    if (top_p != nullptr) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
        pmax[r] = __vimax3_s32(pmax[r], __float_as_int(acc_s[j * 4 + 2 * r]), __float_as_int(acc_s[j * 4 + 2 * r + 1]));
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) sum[r] = (part[r][0] + part[r][1]) + (part[r][2] + part[r][3]);
  if (top_p != nullptr) {
#pragma unroll
    for (int r = 0; r < 2; ++r) top_p[r] = pmax[r];
  }
}

// online softmax of one S tile in place (S -> P, fp32). Lazy rescaling: the reference the exponentials
// are taken against (row_max: a max plus ref_bias) is kept unless the block's max exceeds it by more
// than C::RESCALE_LOG2 in log2 units (P then stays <= 2^RESCALE_LOG2, fine for bf16 and fp32 sums);
// the decision is warp-uniform. Returns whether O must be multiplied by corr.
// TOP_P: row_top is the row's largest P against the current reference (the fast softmax's record,
// KS_TOP_P), else its largest S
template <class C, int NJ = C::BN / 8, bool TOP_P = false>
__device__ __forceinline__ bool softmax_step(float (&acc_s)[C::BN / 2], float (&row_max)[2], float (&row_sum)[2],
                                             float (&corr)[2], float (&row_top)[2], float scale_log2) {
  float mx[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};  // four chains: shorter latency
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      m4[j % 4] = fmaxf(m4[j % 4], fmaxf(acc_s[j * 4 + 2 * r], acc_s[j * 4 + 2 * r + 1]));
    float m = fmaxf(fmaxf(m4[0], m4[1]), fmaxf(m4[2], m4[3]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 1));
    mx[r] = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
    if (!TOP_P) row_top[r] = fmaxf(row_top[r], mx[r]);  // the row's largest S so far (the epilogue's correction)
  }
  // grows: NaN-safe (a row that saw nothing yet has row_max = -inf and must take the new max)
  const bool grows = !((mx[0] - row_max[0]) * scale_log2 <= C::RESCALE_LOG2) ||
                     !((mx[1] - row_max[1]) * scale_log2 <= C::RESCALE_LOG2);
  const bool rescale = C::RESCALE_LOG2 == 0.f ? true : __any_sync(0xffffffff, grows);
  if (rescale) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // the new reference: the block's max plus the bias, where that is above the old one (-inf while
      // nothing was visible); the bias in units of S is worked out here, in the rare branch, so that it
      // costs the steady loops no register (any rounding of it is harmless: the LSE uses row_max as is)
      const float ref = fmaxf(row_max[r], mx[r] + REF_BIAS / scale_log2);
      corr[r] = row_max[r] == -INFINITY ? 1.f : exp2f((row_max[r] - ref) * scale_log2);
      row_max[r] = ref;
      row_sum[r] *= corr[r];
      if (TOP_P) row_top[r] *= corr[r];
    }
  }
  float neg_max_scaled[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) neg_max_scaled[r] = row_max[r] == -INFINITY ? 0.f : -row_max[r] * scale_log2;
  if (TOP_P) {  // the block's largest P, exactly as exp_and_sum computes it
#pragma unroll
    for (int r = 0; r < 2; ++r) row_top[r] = fmaxf(row_top[r], exp2f(fmaf(mx[r], scale_log2, neg_max_scaled[r])));
  }
  exp_and_sum<C, NJ>(acc_s, neg_max_scaled, scale_log2, row_sum);
  return rescale;
}

template <class C>
__device__ __forceinline__ void rescale_o(float (&acc_o)[C::O_REGS], const float (&corr)[2]) {
#pragma unroll
  for (int j = 0; j < C::O_REGS / 4; ++j) {  // O, then the sums of its weights
    acc_o[j * 4 + 0] *= corr[0];
    acc_o[j * 4 + 1] *= corr[0];
    acc_o[j * 4 + 2] *= corr[1];
    acc_o[j * 4 + 3] *= corr[1];
  }
}

template <class C, int STEPS = C::PV_STEPS>
__device__ __forceinline__ void pack_p(uint32_t (&p_frag)[C::PV_STEPS][4], const float (&acc_s)[C::BN / 2]) {
#pragma unroll
  for (int kk = STEPS; kk < C::PV_STEPS; ++kk) p_frag[kk][0] = p_frag[kk][1] = p_frag[kk][2] = p_frag[kk][3] = 0u;
#pragma unroll
  for (int kk = 0; kk < STEPS; ++kk) {
    p_frag[kk][0] = pack_bf16(acc_s[8 * kk + 0], acc_s[8 * kk + 1]);
    p_frag[kk][1] = pack_bf16(acc_s[8 * kk + 2], acc_s[8 * kk + 3]);
    p_frag[kk][2] = pack_bf16(acc_s[8 * kk + 4], acc_s[8 * kk + 5]);
    p_frag[kk][3] = pack_bf16(acc_s[8 * kk + 6], acc_s[8 * kk + 7]);
  }
}

// the steady loop's softmax against the reference, without the block's max: P = exp2(S * scale_log2
// - row_max * scale_log2). Returns whether every P of this thread is safe: each row's partial sum
// finite and at most FAST_LIMIT, so no P is larger either (the window above). Otherwise the caller
// redoes the block exactly: only when the row max grew by more than REF_BIAS + P_LOG2 - 5 = 75 (BN / 4
// <= 32 terms per partial sum) past the block that set the reference, or when the row saw nothing
// before (its max is -inf, so P is inf); a redo takes the exact step, which moves the reference up
constexpr float FAST_LIMIT = 65536.f;  // 2^P_LOG2
// TOP_P: blk_top gets the block's largest P of each row (the caller records it once the block stands)
template <class C, bool TOP_P = false>
__device__ __forceinline__ bool softmax_fast(float (&acc_s)[C::BN / 2], const float (&row_max)[2], float (&blk)[2],
                                             float (&row_top)[2], int (&blk_top)[2], float scale_log2) {
  const float neg[2] = {-row_max[0] * scale_log2, -row_max[1] * scale_log2};  // -inf max: +inf, P inf, redo
  blk[0] = blk[1] = 0.f;
  if constexpr (TOP_P) {
    exp_and_sum<C>(acc_s, neg, scale_log2, blk, nullptr, blk_top);
    return blk[0] <= FAST_LIMIT && blk[1] <= FAST_LIMIT;
  } else {
    exp_and_sum<C>(acc_s, neg, scale_log2, blk, C::WIDE_PV ? nullptr : row_top);
    return blk[0] <= FAST_LIMIT && blk[1] <= FAST_LIMIT;  // false for NaN and inf
  }
}

// the descriptor of this warpgroup's Q for k16 step kk (Q in 64-column chunks, K-major)
template <class C>
__device__ __forceinline__ uint64_t q_desc(uint32_t q16, int kk) {
  return desc_at<16, 1024>(q16, (kk / 4) * C::BM * 128 + (kk % 4) * 32);
}

// S = Q K^T: K in 64-column chunks, K-major; q(kk) gives Q's descriptor for k16 step kk
template <class C, int N = C::BN, class QDesc>
__device__ __forceinline__ void issue_qk(float (&acc_s)[C::BN / 2], const QDesc& q, uint32_t k16) {
  float(&acc)[N / 2] = *reinterpret_cast<float(*)[N / 2]>(&acc_s[0]);  // the first N columns
  if (C::PROBE == 3) return;
#pragma unroll
  for (int kk = 0; kk < C::QK_STEPS; ++kk)
    Wgmma<N>::ss(acc, q(kk), desc_at<16, 1024>(k16, (kk / 4) * C::BN * 128 + (kk % 4) * 32), kk > 0);
}

// O += P V: P from registers, V MN-major (LBO = the stride between column chunks, SBO = 8 rows)
// (accumulate = 0: the first PV GEMM of a tile starts O afresh, so O is never zeroed in registers).
// With WIDE_PV the GEMM runs on N = DV_MMA + 8, over V and the chunk of ones after it: its last four
// accumulators take the row sums of P exactly as the PV GEMM weighs V (P rounded to bf16), so that O
// normalized by them gives a row that one key dominates that key's V as it is
template <class C, int STEPS = C::PV_STEPS>
__device__ __forceinline__ void issue_pv(float (&acc_o)[C::O_REGS], const uint32_t (&p_frag)[C::PV_STEPS][4],
                                         uint32_t v16, int accumulate) {
  constexpr int ROW = C::V_COLS * 2;  // bytes per row of a chunk = the swizzle span
  constexpr int N = C::WIDE_PV ? C::DV_MMA + 8 : C::DV_MMA;
#pragma unroll
  for (int kk = 0; kk < STEPS; ++kk)
    Wgmma<N>::rs(acc_o, p_frag[kk], desc_at<C::BN * ROW, 8 * ROW, ROW>(v16, kk * 16 * ROW), kk > 0 || accumulate);
}

template <bool B> struct Flag { static constexpr bool value = B; };
template <int N> struct Int { static constexpr int value = N; };

template <class C, bool CAUSAL>
__global__ void __launch_bounds__(C::THREADS, 1)
    flash_fwd_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                          const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_o,
                          const DeviceParams p) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem_base = (smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t sQ = smem_base;
  const uint32_t sK = sQ + C::Q_STAGES * C::Q_BYTES;     // + stage * K_BYTES
  const uint32_t sV = sK + C::K_STAGES * C::K_BYTES;      // + stage * V_STAGE_BYTES
  const uint32_t sO = sV + C::STAGES * C::V_STAGE_BYTES;  // O_TMA: + warpgroup * 64 * DV_PAD * 2
  const uint32_t bars = sQ + C::TILE_BYTES;
  // Q's barriers: a full/empty pair per buffer (0-1 and 2-3), or with C::Q_SPLIT (one buffer) a pair per
  // consumer warpgroup's part, after the tile ring (full QP + w, empty QP + CWG + w)
  constexpr int QP = 8 + 2 * C::K_STAGES + 2 * C::STAGES;
  auto q_full = [&](int i) { return C::Q_SPLIT ? bars + 8 * (QP + i) : bars + 8 * i; };
  auto q_empty = [&](int i) { return C::Q_SPLIT ? bars + 8 * (QP + C::CWG + i) : bars + 8 * (2 + i); };
  // a ring of two tile slots: the producer announces the next tile, the consumers read it
  constexpr int KB = 2 * C::K_STAGES;  // the barriers of K's stages, before V's
  auto tile_full = [&](int i) { return bars + 8 * (4 + KB + 2 * C::STAGES + i); };
  auto tile_empty = [&](int i) { return bars + 8 * (6 + KB + 2 * C::STAGES + i); };
  __shared__ int2 tile_slot[2];  // (tile index, its m_block: KS_TILE_RING)
  auto k_full = [&](int s) { return bars + 8 * (4 + s); };
  auto k_empty = [&](int s) { return bars + 8 * (4 + C::K_STAGES + s); };
  auto v_full = [&](int s) { return bars + 8 * (4 + KB + s); };
  auto v_empty = [&](int s) { return bars + 8 * (4 + KB + C::STAGES + s); };

  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int i = 0; i < (C::Q_SPLIT ? C::CWG : C::Q_STAGES); ++i) {
      mbar_init(q_full(i), 1);
      // one arrive per consumer warp (a part's: per warp of its warpgroup)
      mbar_init(q_empty(i), C::Q_SPLIT ? 4 : C::CONSUMER_WARPS);
    }
    for (int s = 0; s < C::K_STAGES || s < C::STAGES; ++s) {
      if (s < C::K_STAGES) mbar_init(k_full(s), 1);
      if (s < C::STAGES) mbar_init(v_full(s), 1);
      if (s < C::K_STAGES) mbar_init(k_empty(s), C::CONSUMER_WARPS);
      if (s < C::STAGES) mbar_init(v_empty(s), C::CONSUMER_WARPS);
    }
    for (int i = 0; i < 2; ++i) {
      mbar_init(tile_full(i), 1);
      mbar_init(tile_empty(i), C::CONSUMER_WARPS);
    }
    fence_barrier_init();
    fence_proxy_async();
  }
  if constexpr (C::WIDE_PV) {  // each stage's chunk of ones after its V
    constexpr int CHUNK = C::BN * C::V_COLS * 2;
    for (int s = 0; s < C::STAGES; ++s)
      for (int i = threadIdx.x * 16; i < CHUNK; i += C::THREADS * 16)
        asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(sV + s * C::V_STAGE_BYTES + C::V_BYTES + i),
                     "r"(0x3f803f80u) : "memory");
    fence_proxy_async();  // the ones, visible to the tensor cores
  }
  __syncthreads();

  if (wg == 0) {
    // ---------------------------------------------------------------- producer
    regs_dealloc<C::REGS_PRODUCER>();
    // K/V block n_block of (K/V head hk, batch b), the kv_it-th the CTA loads, each into its free stage
    // (its K and its V apart: load_k, load_v)
    auto load_k = [&](int n_block, int kv_it, int hk, int b) {
      const int ks = kv_it % C::K_STAGES;
      mbar_wait(k_empty(ks), ((kv_it / C::K_STAGES) & 1) ^ 1);
      mbar_expect_tx(k_full(ks), C::K_BYTES);
#pragma unroll
      for (int c = 0; c < C::QK_CHUNKS; ++c)
        tma_load_4d(sK + ks * C::K_BYTES + c * C::BN * 128, &tm_k, k_full(ks), c * 64, n_block * C::BN, hk, b);
    };
    auto load_v = [&](int n_block, int kv_it, int hk, int b) {
      const int s = kv_it % C::STAGES;
      mbar_wait(v_empty(s), ((kv_it / C::STAGES) & 1) ^ 1);
      mbar_expect_tx(v_full(s), C::V_BYTES);
#pragma unroll
      for (int c = 0; c < C::V_CHUNKS; ++c)
        tma_load_4d(sV + s * C::V_STAGE_BYTES + c * C::BN * C::V_COLS * 2, &tm_v, v_full(s), c * C::V_COLS,
                    n_block * C::BN, hk, b);
    };
    auto load_kv = [&](int n_block, int kv_it, int hk, int b) {
      load_k(n_block, kv_it, hk, b);
      load_v(n_block, kv_it, hk, b);
    };
    // KS_K_AHEAD: within a tile, a block's V after the next block's K: K(0), K(1), V(0), K(2), V(1), ...,
    // K(n-1), V(n-2), V(n-1) (i: the visiting order, last block first), since the consumers' S(i) goes
    // with PV(i-1) and needs K(i) with V(i-1): K(i+1) no longer queues behind V(i)'s stage wait. The
    // tile's last V is issued before the next tile's loads (a V carried over stalls the tile ring behind
    // a tile with no blocks). Compile-time: a run-time choice costs code and a spill in the producer's
    // few registers.
    // No deadlock with K_STAGES and STAGES >= 2: each wait is for releases that need only loads issued
    // before it. K(i+1)'s stage: the release of K(i-1) or earlier, after its S GEMM (with PV(i-2): K(i-1)
    // and V(i-2)), or, for a block a warpgroup skips, once its K and V have landed (V(i-1)): all issued
    // before K(i+1); the ping-pong turns before it need no later load (with one K stage, K(i+1) would
    // wait for a skipped block i, so for V(i), issued after it). V(i)'s stage: the release of V(i-2) or
    // earlier, after PV(i-2), which goes with S(i-1): K(i-1) and V(i-2). Across tiles, the first blocks
    // wait for the last ones of the tile before (the owed PV GEMM of its last block goes with S(0): K(0),
    // issued before V(1) waits for it), and begin_tile's waits (tile ring, Q buffer) for earlier tiles.
    constexpr bool K_AHEAD = (KS_K_AHEAD >= 3 && C::BN == 80) || (KS_K_AHEAD >= 4 && C::BN == 112 && CAUSAL) ||
                             (KS_K_AHEAD == 5 && C::DQK == 128 && C::BN == 128 && CAUSAL);
    static_assert(!K_AHEAD || (C::K_STAGES >= 2 && C::STAGES >= 2), "KS_K_AHEAD: two stages of K and of V");
    // a tile's n_blocks > 0 K/V blocks in that order, from the kv_it-th; after_first() once the first
    // block's K and V are issued (so after K(1) too)
    auto load_kv_ahead = [&](int n_blocks, int& kv_it, int hk, int b, auto after_first) {
      load_k(n_blocks - 1, kv_it, hk, b);
      for (int i = 0; i < n_blocks; ++i, ++kv_it) {
        if (i + 1 < n_blocks) load_k(n_blocks - 2 - i, kv_it + 1, hk, b);
        load_v(n_blocks - 1 - i, kv_it, hk, b);
        if (i == 0) after_first();
      }
    };
    // C::Q_SPLIT: the first row of consumer warpgroup w's part of the tile from m0 (a part wholly past
    // seqlen_q, whose rows are never stored, takes its box from the last row: no box starts outside the tensor)
    auto q_part_row = [&](int m0, int w) { return w == 0 ? m0 : min(m0 + 64 * w, p.seqlen_q - 1); };
    // C::Q_SPLIT: part w of a tile's Q (warpgroup w's 64 rows of each chunk; tm_q's box is 64 rows), once
    // warpgroup w has released its part of the previous tile's (one buffer: the phase is q_it's)
    auto load_q_part = [&](int q_it, int w, int m0, int h, int b) {
      mbar_wait(q_empty(w), (q_it & 1) ^ 1);
      mbar_expect_tx(q_full(w), C::Q_BYTES / C::CWG);
#pragma unroll
      for (int c = 0; c < C::QK_CHUNKS; ++c)
        tma_load_4d(sQ + c * C::BM * 128 + w * 64 * 128, &tm_q, q_full(w), c * 64, q_part_row(m0, w), h, b);
    };
    // Q of a tile (rows from m0, head h, batch b), the q_it-th the CTA loads, into its free buffer
    auto load_q = [&](int q_it, int m0, int h, int b) {
      if constexpr (C::Q_SPLIT != 0) {  // the parts in the warpgroups' turn order
#pragma unroll
        for (int w = 0; w < C::CWG; ++w) load_q_part(q_it, w, m0, h, b);
        return;
      }
      const int qs = q_it % C::Q_STAGES;
      mbar_wait(q_empty(qs), ((q_it / C::Q_STAGES) & 1) ^ 1);
      mbar_expect_tx(q_full(qs), C::Q_BYTES);
#pragma unroll
      for (int c = 0; c < C::QK_CHUNKS; ++c)
        tma_load_4d(sQ + qs * C::Q_BYTES + c * C::BM * 128, &tm_q, q_full(qs), c * 64, m0, h, b);
    };
    // tile t announced to the consumers in the ring's slot j (the j-th tile the CTA takes)
    auto announce = [&](int j, int t, int m_block) {
      mbar_wait(tile_empty(j & 1), ((j >> 1) & 1) ^ 1);
      tile_slot[j & 1] = make_int2(t, m_block);
      mbar_arrive(tile_full(j & 1));
    };
    // KS_Q_AHEAD 2: only causal with groups of 8 or more query heads per K/V head (where it gained);
    // 3: as 2 on d128 only (the other head sizes' kernels as with 0); 4: as 3, up to 4096 keys
    const bool q_ahead =
        KS_Q_AHEAD == 1 || ((KS_Q_AHEAD == 2 || (KS_Q_AHEAD >= 3 && C::DQK == 128)) && CAUSAL && p.group >= KS_Q_AHEAD_MIN_GROUP &&
                            (KS_Q_AHEAD != 4 || p.seqlen_k <= 4096));
    if (KS_Q_AHEAD && C::Q_STAGES == 2 && threadIdx.x == 0 && q_ahead) {
      // the next tile is taken (its index asked for at this tile's start) and announced, and its Q loaded,
      // once this tile's first K/V block is issued: a short tile's successor then finds its Q loaded
      const int num_tiles = p.m_blocks * p.heads_q * p.batch;
      int kv_it = 0, q_it = 0, j = 0;
      // announce tile t in the ring's next slot and load its Q; its number of K/V blocks
      auto begin_tile = [&](int t) {
        if (t >= num_tiles) {
          announce(j++, t, 0);
          return 0;
        }
        const Tile tile = tile_at<PRODUCER_DIV>(t, p);
        announce(j++, t, tile.m_block);
        const int n_blocks = kv_blocks<C, CAUSAL>(tile.m_block * C::BM, p);
        if (n_blocks > 0) load_q(q_it++, tile.m_block * C::BM, tile.h, tile.b);
        return n_blocks;
      };
      int t = blockIdx.x, n_blocks = begin_tile(t);
      while (t < num_tiles) {
        const int next = static_cast<int>(atomicAdd(&tile_counters[p.tile_slot], 1u) + p.tile_offset);
        const Tile tile = tile_at<PRODUCER_DIV>(t, p);
        const int hk = kv_head(tile.h, p);
        int next_blocks = 0;
        if (n_blocks == 0) next_blocks = begin_tile(next);
        if constexpr (K_AHEAD) {  // the next tile begun once the first block's K and V are issued, as below
          if (n_blocks > 0) load_kv_ahead(n_blocks, kv_it, hk, tile.b, [&] { next_blocks = begin_tile(next); });
        } else {
          for (int i = 0; i < n_blocks; ++i, ++kv_it) {
            load_kv(n_blocks - 1 - i, kv_it, hk, tile.b);
            if (i == 0) next_blocks = begin_tile(next);
          }
        }
        t = next;
        n_blocks = next_blocks;
      }
    } else if (threadIdx.x == 0) {
      const int num_tiles = p.m_blocks * p.heads_q * p.batch;
      int kv_it = 0, q_it = 0;
      // KS_Q_PREFETCH: the next tile taken at this one's start, and its Q brought into L2 for its load
      constexpr bool PREFETCH = KS_Q_PREFETCH == 2 || (KS_Q_PREFETCH == 1 && C::Q_STAGES == 1);
      // KS_Q_PREFETCH 3-4: the next tile's index asked for at this tile's start (FA3's order), so that it
      // is known when this tile's loads are issued; 4 only on causal tiles up to TAKE_EARLY_TO keys
      constexpr bool MAY_TAKE_EARLY = KS_Q_PREFETCH == 3 || (KS_Q_PREFETCH == 4 && CAUSAL && C::TAKE_EARLY_TO > 0);
      const bool take_early = MAY_TAKE_EARLY && (KS_Q_PREFETCH == 3 || p.seqlen_k <= C::TAKE_EARLY_TO);
      for (int j = 0, t = blockIdx.x;; ++j) {
        if (t >= num_tiles) {
          announce(j, t, 0);
          break;
        }
        const Tile tile = tile_at<PRODUCER_DIV>(t, p);
        announce(j, t, tile.m_block);
        const int m0 = tile.m_block * C::BM, hk = kv_head(tile.h, p);
        const int n_blocks = kv_blocks<C, CAUSAL>(m0, p);
        int next = 0;
        if (take_early) next = static_cast<int>(atomicAdd(&tile_counters[p.tile_slot], 1u) + p.tile_offset);
        if constexpr (PREFETCH) {
          next = static_cast<int>(atomicAdd(&tile_counters[p.tile_slot], 1u) + p.tile_offset);
          if (next < num_tiles) {
            const Tile nt = tile_at<PRODUCER_DIV>(next, p);
#pragma unroll
            for (int c = 0; c < C::QK_CHUNKS; ++c) {
              if constexpr (C::Q_SPLIT != 0) {  // a box of 64 rows: every part
#pragma unroll
                for (int w = 0; w < C::CWG; ++w)
                  tma_prefetch_4d(&tm_q, c * 64, q_part_row(nt.m_block * C::BM, w), nt.h, nt.b);
              } else {
                tma_prefetch_4d(&tm_q, c * 64, nt.m_block * C::BM, nt.h, nt.b);
              }
            }
          }
        }
        if (n_blocks > 0) {
          load_q(q_it, m0, tile.h, tile.b);
          if constexpr (K_AHEAD) {
            load_kv_ahead(n_blocks, kv_it, hk, tile.b, [] {});
          } else {
            for (int i = 0; i < n_blocks; ++i, ++kv_it) {
              load_kv(n_blocks - 1 - i, kv_it, hk, tile.b);
            }
          }
          ++q_it;
        }
        // the next tile is taken once this one's loads are issued (at most STAGES blocks ahead)
        if constexpr (PREFETCH) t = next;
        else if (take_early) t = next;
        else t = static_cast<int>(atomicAdd(&tile_counters[p.tile_slot], 1u) + p.tile_offset);
      }
    }
    return;
  }

  // ------------------------------------------------------------------ consumers
  regs_alloc<C::REGS_CONSUMER>();
  // consumer warpgroup: rows cw*64 .. cw*64+63 of the tile; warp-uniform in the compiler's eyes (a
  // shuffle's result is), so the descriptors derived from it live in uniform registers
  const int cw = __shfl_sync(0xffffffff, wg, 0) - 1;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const int col_lane = 2 * (lane % 4);
  const uint32_t q16_0 = (sQ + cw * 64 * 128) >> 4, k16 = sK >> 4, v16 = sV >> 4;
  const int num_tiles = p.m_blocks * p.heads_q * p.batch;
  const int diag = p.seqlen_k - p.seqlen_q;  // causal: column j visible from row i iff j <= i + diag
  const int row_in_tile = cw * 64 + warp * 16 + lane / 4;  // + 8 for the second row of a thread
  int kv_it = 0, q_it = 0;
  // ping-pong: the consumer warpgroups take turns to issue their GEMMs (barrier 1 + cw is this
  // warpgroup's turn), so one warpgroup's softmax runs while the tensor cores work for another
  const int my_turn = 1 + cw, next_turn = 1 + (cw + 1) % C::CWG;
  constexpr bool FAST = C::template FAST_SOFTMAX<CAUSAL>;  // the steady loop's fast softmax
  // the sums of the PV GEMM's weights from the tensor cores where the fast softmax runs (it never
  // computes a row max); elsewhere the epilogue corrects the row sum of P by its largest term
  constexpr bool TC_SUMS = C::WIDE_PV;
  // KS_TOP_P: the fast softmax records each row's largest P (against the current reference) instead of its
  // largest S; the exact steps of such a kernel record theirs as P too
  constexpr bool TOP_P = KS_TOP_P && FAST && !TC_SUMS;
  constexpr float TOP_NONE = TOP_P ? 0.f : -INFINITY;
  if (cw == C::CWG - 1) named_bar_arrive(1, 256);

  float acc_o[C::O_REGS], acc_s[C::BN / 2];
  uint32_t p_frag[C::PV_STEPS][4];
  if (C::PROBE == 3) {  // S from no GEMM: values of its own, then each block's P
#pragma unroll
    for (int i = 0; i < C::BN / 2; ++i) acc_s[i] = p.scale_log2 * float(i + threadIdx.x);
  }
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f}, corr[2] = {1.f, 1.f};
  float row_top[2] = {TOP_NONE, TOP_NONE};  // the row's largest S or P (without the tensor cores' sums)
  int o_acc = 0;     // whether the owed tile's last PV GEMM accumulates (0: it is its first)
  int prev_s = 0;    // the stage of the V block that P belongs to
  uint32_t prev_ph = 0;
  // the tile whose last PV GEMM and epilogue are still owed (-1: none): they are done under the next
  // tile's first S GEMM and softmax, so the tensor cores see no gap between tiles
  int t_owed = -1;
  // half blocks (causal, BN = 128): a K/V block of whose columns this warpgroup's rows see none past
  // the first 64 (the causal diagonal, or a block masked whole for it) takes its S GEMM on N = 64 and
  // its softmax on those columns; P's other half is 0 (the PV GEMM stays whole: a choice of PV GEMM
  // at run time makes ptxas inject warpgroup.arrive, C7519). Only with the fast softmax, and not at
  // d96, nor with the sums of P in a d_v 128 PV GEMM (KS_D128_WIDE_SHORT): elsewhere ptxas serializes the
  // wgmmas (C7511)
  constexpr bool HALVES = CAUSAL && C::BN == 128 && C::DQK != 96 && C::template FAST_SOFTMAX<CAUSAL> &&
                          !(C::DV == 128 && C::WIDE_PV);
  constexpr int HS = C::PV_STEPS / 2;  // P's fragments of the first 64 columns
  // KS_K_RELEASE: K released as soon as the exact step's S GEMM is done (not on the half-block tiles,
  // where ptxas then serializes the wgmmas of the causal d128 kernel: C7511)
  constexpr bool K_EARLY_EXACT = KS_K_RELEASE == 2 || (KS_K_RELEASE == 1 && !HALVES);
  // causal: a warpgroup skips the blocks masked whole for its rows (with half blocks, those take half
  // an S GEMM already, and skipping them made ptxas serialize the wgmmas of the d64 192x128 tile)
  constexpr bool SKIPS = CAUSAL && !HALVES && C::DQK >= 128;
  // each tile settled at once (its last PV GEMM and epilogue at its end, none owed): non-causal tiles, and the
  // causal d192/128 128x128 tile (below)
  constexpr bool AT_ONCE = !CAUSAL || (C::DQK == 192 && C::CWG == 2);
  // KS_O_IN_K: the 128x128 d192/128 tile, which has no room for O in shared memory (Q 48 KB, K 2 x 48 KB, V 2 x
  // 32 KB), writes O into the K stage of the tile's last block (48 KB: O's 2 x 16 KB fit) as the O_TMA path
  // stages it, stores it with TMA, and releases that stage (its K release at that block skipped) once the
  // stores have read it: one arrive for the warpgroup's 4 warps. That block is the tile's last one visited
  // (iteration n_blocks - 1, the same stage for both warpgroups: a skipped block is never the last), so
  // both warpgroups' last S GEMMs read the stage: before writing, a warpgroup waits on the named barrier
  // 10 + 2 * other + the tile's parity, which the other warpgroup arrives at (bar.arrive) once its own last
  // S GEMM is done and stands (the exact step's S GEMM waited, the fast softmax's vote passed, or its redo
  // done), where it would have released that K. Two barriers per warpgroup, by the parity of the tile (of
  // those with K/V blocks: q_it), as a warpgroup may arrive for its next tile before the other has waited
  // for this one's arrival, but never two ahead (its own next epilogue waits for the other's next
  // arrival). Tiles with no K/V block keep the register epilogue. Needs each tile settled at once.
  constexpr bool O_IN_K = KS_O_IN_K && !C::O_TMA && C::DQK == 192 && C::DV == 128 && C::BN == 128 && C::CWG == 2;
  static_assert(!O_IN_K || (AT_ONCE && C::CONSUMER_WARPS == 8 && 2 * 64 * C::DV_PAD * 2 <= C::K_BYTES), "O_IN_K");
  int o_stage = -1;    // O_IN_K: the K stage that holds O in this epilogue (-1: O from registers)
  int o_wait_bar = 0;  // O_IN_K: the barrier the other warpgroup arrives at for this tile

  // epilogue: O normalized by the sums of the PV GEMM's own weights (acc_o's last four), the LSE from
  // the row sums of P; store O and LSE; empty rows give 0 and LSE -inf
  // the epilogue's (m_block, head, batch): with KS_FAST_DIV 3 the causal kernels' by the high-word form, but
  // d192/128's by the whole product (with the high word ptxas serializes its wgmmas, C7511)
  constexpr int END_DIV = !CAUSAL ? (KS_FAST_DIV >= 2 ? 1 : 0) : KS_FAST_DIV == 3 ? (C::DQK != 192 ? 2 : 1) : 0;
  auto store_tile = [&](int t, const float (&rmax)[2], float (&rsum)[2], const float (&rtop)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rsum[r] += __shfl_xor_sync(0xffffffff, rsum[r], 1);
      rsum[r] += __shfl_xor_sync(0xffffffff, rsum[r], 2);
    }
    // the sums O is normalized by: the tensor cores' (row a's at acc_o[DV_MMA / 2], row b's two on), or
    // the row sum of P with its largest term replaced by that term rounded to bf16 as the PV GEMM took it
    // (recomputed exactly as the softmax did: the row's largest S against the reference it was taken
    // against, which has not moved since; a move puts the new largest S in that block)
    float w[2];
    if constexpr (TC_SUMS) {
      const float* sums = &acc_o[C::DV_MMA / 2];  // row a's at sums[0] (and [1]), row b's at sums[2]
      w[0] = sums[0];
      w[1] = sums[2];
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float m = fmaxf(rtop[r], __shfl_xor_sync(0xffffffff, rtop[r], 1));  // the fast softmax's is this thread's
        m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, 2));
        float top = m;  // TOP_P: the largest P itself
        if (!TOP_P) {
          const float neg = rmax[r] == -INFINITY ? 0.f : -rmax[r] * p.scale_log2;
          top = exp2f(fmaf(m, p.scale_log2, neg));
        }
        w[r] = (rsum[r] - top) + __bfloat162float(__float2bfloat16_rn(top));
      }
    }
    const float inv[2] = {w[0] > 0.f ? 1.f / w[0] : 0.f, w[1] > 0.f ? 1.f / w[1] : 0.f};
    const Tile tile = tile_at<END_DIV>(t, p);
    const int row_a = tile.m_block * C::BM + row_in_tile, row_b = row_a + 8;
    // this warpgroup's 64 rows of O at o_wg (1024-byte aligned) in DV_PAD / 64 chunks of 64 x 64 (8 KB,
    // 128-byte swizzle), made visible to the TMA unit
    auto stage_o = [&](uint32_t o_wg) {
      const int mat = lane / 8, r_in = warp * 16 + (mat & 1) * 8 + (lane & 7);
      const uint32_t row_at = o_wg + r_in * 128, unit_x = (mat >> 1) ^ (lane & 7);
#pragma unroll
      for (int j = 0; j < C::DV_MMA / 8; j += 2)  // matrices: rows a, rows b of groups j, then j + 1
        stmatrix_x4(row_at + (j / 8) * 8192 + (((j % 8) ^ unit_x) << 4),
                    pack_bf16(acc_o[j * 4 + 0] * inv[0], acc_o[j * 4 + 1] * inv[0]),
                    pack_bf16(acc_o[j * 4 + 2] * inv[1], acc_o[j * 4 + 3] * inv[1]),
                    pack_bf16(acc_o[j * 4 + 4] * inv[0], acc_o[j * 4 + 5] * inv[0]),
                    pack_bf16(acc_o[j * 4 + 6] * inv[1], acc_o[j * 4 + 7] * inv[1]));
      fence_proxy_async();  // the writes, visible to the TMA unit
    };
    // (one thread) the staged O at o_wg to global memory with TMA stores, in one bulk group
    auto store_staged_o = [&](uint32_t o_wg) {
#pragma unroll
      for (int c = 0; c < C::DV_PAD / 64; ++c)
        tma_store_4d(&tm_o, o_wg + c * 8192, c * 64, tile.m_block * C::BM + cw * 64, tile.h, tile.b);
      bulk_commit();
    };
    bool o_in_k = false;
    if constexpr (O_IN_K) o_in_k = o_stage >= 0;
    if constexpr (C::O_TMA) {
      // O staged in its own buffer; one thread stores it with TMA, and waits until it is read before the
      // buffer is written again
      const uint32_t o_wg = sO + cw * 64 * C::DV_PAD * 2;
      if (tid == 0) bulk_wait_read();
      named_bar_sync(7 + cw, 128);
      stage_o(o_wg);
      named_bar_sync(7 + cw, 128);
      if (tid == 0) store_staged_o(o_wg);
    } else if (o_in_k) {
      // O_IN_K: O staged in the K stage of the tile's last block, warpgroup cw's two chunks side by side at
      // byte cw * 16 KB of it (warpgroup 0 over K's 64-column chunk 0, warpgroup 1 over chunk 1); written
      // once the other warpgroup's S GEMMs on that stage are done and stand (its arrival at o_wait_bar),
      // and this one's (the barrier completes with all four of its warps in it, past their last PV GEMM)
      const uint32_t o_wg = sK + o_stage * C::K_BYTES + cw * 64 * C::DV_PAD * 2;
      named_bar_sync(o_wait_bar, 256);
      stage_o(o_wg);
      named_bar_sync(7 + cw, 128);
      if (tid == 0) {
        store_staged_o(o_wg);
        bulk_wait_read();  // the stores have read the stage: it may load K again
        mbar_arrive(k_empty(o_stage), C::CONSUMER_WARPS / C::CWG);  // for this warpgroup's warps
      }
    } else {
      // 16-byte stores: a quad's column groups transposed four at a time, so each thread holds 8
      // consecutive columns of its row (O's strides are multiples of 8 elements: checked at launch)
      __nv_bfloat16* o = p.out + tile.b * p.o_batch_stride + tile.h * p.o_head_stride;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = r == 0 ? row_a : row_b;
#pragma unroll
        for (int k = 0; k < C::DV_MMA / 32; ++k) {
          uint32_t m[4];
#pragma unroll
          for (int i = 0; i < 4; ++i)
            m[i] = pack_bf16(acc_o[(4 * k + i) * 4 + 2 * r] * inv[r], acc_o[(4 * k + i) * 4 + 2 * r + 1] * inv[r]);
          quad_transpose(m, lane);
          const int col = 32 * k + 8 * (lane % 4);
          if (col < C::DV && row < p.seqlen_q)
            *reinterpret_cast<uint4*>(o + row * p.o_seq_stride + col) = make_uint4(m[0], m[1], m[2], m[3]);
        }
      }
    }
    if (p.lse != nullptr && (lane % 4) == 0) {
      float* lse = p.lse + tile.b * p.lse_batch_stride + tile.h * p.lse_head_stride;
      if (row_a < p.seqlen_q) lse[row_a] = rsum[0] > 0.f ? rmax[0] * p.scale + logf(rsum[0]) : -INFINITY;
      if (row_b < p.seqlen_q) lse[row_b] = rsum[1] > 0.f ? rmax[1] * p.scale + logf(rsum[1]) : -INFINITY;
    }
  };
  // the owed tile's last PV GEMM on its own (before an empty tile, and after the last tile)
  // a turn at the tensor cores with nothing to issue (a skipped block)
  auto pass_turn = [&]() {
    named_bar_sync(my_turn, 256);
    named_bar_arrive(next_turn, 256);
  };
  auto settle_owed = [&]() {
    mbar_wait(v_full(prev_s), prev_ph);
    named_bar_sync(my_turn, 256);
    wgmma_fence();
    issue_pv<C>(acc_o, p_frag, v16 + prev_s * (C::V_STAGE_BYTES >> 4), o_acc);
    wgmma_commit();
    named_bar_arrive(next_turn, 256);
    wgmma_wait<0>();
    fence_regs(acc_o);
    if (lane == 0) mbar_arrive(v_empty(prev_s));
    store_tile(t_owed, row_max, row_sum, row_top);
    t_owed = -1;
  };

  // KS_TILE_RING: m_block from the ring (not in the causal d64 kernel: there ptxas then serializes the wgmmas, C7511);
  // else from the index, by START_DIV's form of tile_at
  constexpr bool RING_M = KS_TILE_RING && !(CAUSAL && C::DQK == 64);
  constexpr int START_DIV = !CAUSAL ? (KS_FAST_DIV >= 2 ? 1 : 0) : KS_FAST_DIV == 3 ? 2 : 0;
  for (int j = 0;; ++j) {
    mbar_wait(tile_full(j & 1), (j >> 1) & 1);
    const int t = __shfl_sync(0xffffffff, tile_slot[j & 1].x, 0);
    const int m_block = RING_M ? __shfl_sync(0xffffffff, tile_slot[j & 1].y, 0) : 0;
    __syncwarp();
    if (lane == 0) mbar_arrive(tile_empty(j & 1));
    if (t >= num_tiles) break;
    // (head, batch) are recomputed for the epilogue
    const int m0 = (RING_M ? m_block : tile_at<START_DIV>(t, p).m_block) * C::BM;
    const int n_blocks = kv_blocks<C, CAUSAL>(m0, p);
    const int row_a = m0 + row_in_tile, row_b = row_a + 8;
    if (n_blocks == 0) {  // nothing to attend for any row of the tile
      if (!O_IN_K && t_owed >= 0) settle_owed();  // (O_IN_K: every tile settled at once)
#pragma unroll
      for (int i = 0; i < C::O_REGS; ++i) acc_o[i] = 0.f;
      float zmax[2] = {-INFINITY, -INFINITY}, zsum[2] = {0.f, 0.f};
      if constexpr (O_IN_K) o_stage = -1;  // no K stage: O from registers
      store_tile(t, zmax, zsum, zmax);
      continue;
    }
    const int wg_row0 = m0 + cw * 64;  // smallest row of this warpgroup
    // blocks 0 .. n_full-1 need no mask for any row of this warpgroup; they are visited last
    int n_full = p.seqlen_k / C::BN;
    if (CAUSAL) {
      const int vis = wg_row0 + diag + 1;  // columns 0 .. vis-1 are visible from every row of the warpgroup
      n_full = min(n_full, vis > 0 ? vis / C::BN : 0);
    }
    const int n_masked = n_blocks - min(n_full, n_blocks);  // the first n_masked iterations mask
    // a block is half when this warpgroup's rows see none of its columns past the first 64
    const int cols_end = min(p.seqlen_k, wg_row0 + 64 + diag);
    auto is_half = [&](int blk) { return HALVES && cols_end <= blk * C::BN + C::BN / 2; };
    // the first i0 blocks visited (the tile's last ones) are masked whole for this warpgroup's
    // rows; it skips them (no GEMM, no softmax), keeping at least the tile's first block so that a row
    // that sees nothing still ends with 0 and LSE -inf through the usual path
    int i0 = 0;
    if constexpr (SKIPS) {
      const int mine = cols_end > 0 ? (cols_end + C::BN - 1) / C::BN : 0;
      i0 = n_blocks - max(mine, 1);
    }
    // a masked block's softmax on its first NJ column groups
    auto masked_softmax = [&](auto nj, int blk, bool masked_block) {
      constexpr int NJ = decltype(nj)::value;
      if (masked_block) mask_scores<C, CAUSAL, NJ>(acc_s, blk * C::BN, row_a, row_b, col_lane, diag, p);
      return softmax_step<C, NJ, TOP_P>(acc_s, row_max, row_sum, corr, row_top, p.scale_log2);
    };

    const int qs = q_it % C::Q_STAGES;
    const uint32_t q16 = q16_0 + qs * (C::Q_BYTES >> 4);
    // O_IN_K: the barrier this warpgroup arrives at once its S GEMM of the tile's last block is done and
    // stands (where it would release that block's K, which is kept for O instead)
    const int o_done_bar = 10 + 2 * cw + (q_it & 1);
    // the barriers of this warpgroup's Q: its buffer's, or (C::Q_SPLIT) its part's; their phase is
    // (q_it / Q_STAGES) & 1 either way (a part's complete once per tile, as the buffer's)
    const int qb = C::Q_SPLIT ? cw : qs;
    // Q's descriptors: built once per tile in the causal kernels without the fast softmax, at each
    // GEMM in the others (ptxas then keeps each steady loop shortest and spills nothing: SASS, nvcc 13.0)
    constexpr bool Q_PER_TILE = CAUSAL && !FAST;
    uint64_t qd[C::QK_STEPS];
    if constexpr (Q_PER_TILE) {
#pragma unroll
      for (int kk = 0; kk < C::QK_STEPS; ++kk) qd[kk] = q_desc<C>(q16, kk);
    }
    auto q = [&](int kk) {
      if constexpr (Q_PER_TILE) return qd[kk]; else return q_desc<C>(q16, kk);
    };
    auto qk = [&](bool half, uint32_t k_at) {  // S on the block's first 64 columns when half
      if constexpr (HALVES) {
        if (half) { issue_qk<C, C::BN / 2>(acc_s, q, k_at); return; }
      }
      issue_qk<C>(acc_s, q, k_at);
    };

    // first KV block (the last one: masked first), with the owed tile's last PV GEMM behind it. Two
    // copies, with and without an owed tile: both end with no GEMM in flight, or ptxas serializes
    // every wgmma of the kernel
    // the skipped blocks: the warpgroup still takes its turn at the tensor cores for each (the other
    // warpgroups' turns count on it), settles the owed tile in the first (and passes a second turn where
    // the first block takes two: a single Q buffer), and releases each block's K and V once they have
    // landed (an arrive before that could count toward the stage's previous use)
    if (SKIPS && i0 > 0) {
      for (int i = 0; i < i0; ++i) {
        if (i == 0 && !O_IN_K && t_owed >= 0) {
          settle_owed();
          if (C::Q_STAGES == 1) pass_turn();
        } else {
          pass_turn();
        }
        const int it = kv_it + i, ki = it % C::K_STAGES, si = it % C::STAGES;
        const uint32_t kphi = (it / C::K_STAGES) & 1, phi = (it / C::STAGES) & 1;
        mbar_wait(k_full(ki), kphi);
        mbar_wait(v_full(si), phi);
        if (lane == 0) {
          mbar_arrive(k_empty(ki));
          mbar_arrive(v_empty(si));
        }
      }
    }
    // the block's K stage and phase (s, ph), and its V's (vs, vph)
    int s = (kv_it + i0) % C::K_STAGES, vs = (kv_it + i0) % C::STAGES;
    uint32_t ph = ((kv_it + i0) / C::K_STAGES) & 1, vph = ((kv_it + i0) / C::STAGES) & 1;
    auto first_block = [&](auto owed, auto half_flag) {
      constexpr bool half = decltype(half_flag)::value;
      // with a single Q buffer the owed PV GEMM goes first, while this tile's Q is still loading
      constexpr bool EARLY = decltype(owed)::value && C::Q_STAGES == 1;
      if constexpr (EARLY) {
        mbar_wait(v_full(prev_s), prev_ph);
        named_bar_sync(my_turn, 256);
        wgmma_fence();
        issue_pv<C>(acc_o, p_frag, v16 + prev_s * (C::V_STAGE_BYTES >> 4), o_acc);
        wgmma_commit();
        named_bar_arrive(next_turn, 256);
      }
      mbar_wait(q_full(qb), (q_it / C::Q_STAGES) & 1);
      mbar_wait(k_full(s), ph);
      if (decltype(owed)::value && !EARLY) mbar_wait(v_full(prev_s), prev_ph);
      named_bar_sync(my_turn, 256);
      wgmma_fence();
      qk(half, k16 + s * (C::K_BYTES >> 4));
      wgmma_commit();
      if (decltype(owed)::value && !EARLY) {
        issue_pv<C>(acc_o, p_frag, v16 + prev_s * (C::V_STAGE_BYTES >> 4), o_acc);
        wgmma_commit();
      }
      named_bar_arrive(next_turn, 256);
      if (EARLY) wgmma_wait<0>(); else if (decltype(owed)::value) wgmma_wait<1>(); else wgmma_wait<0>();
      fence_regs(acc_s);
      const bool keep_k = O_IN_K && i0 == n_blocks - 1;  // the tile's last block: its K stage takes O
      if (K_EARLY_EXACT && keep_k) named_bar_arrive(o_done_bar, 256);
      if (K_EARLY_EXACT && !keep_k && lane == 0) mbar_arrive(k_empty(s));
      if (lane == 0 && i0 == n_blocks - 1) mbar_arrive(q_empty(qb));
      float owed_max[2] = {row_max[0], row_max[1]}, owed_sum[2] = {row_sum[0], row_sum[1]};
      const float owed_top[2] = {row_top[0], row_top[1]};
      row_max[0] = row_max[1] = -INFINITY;
      row_top[0] = row_top[1] = TOP_NONE;
      row_sum[0] = row_sum[1] = 0.f;
      // O starts afresh: nothing to rescale
      if (half) masked_softmax(Int<C::BN / 16>(), n_blocks - 1 - i0, true);
      else masked_softmax(Int<C::BN / 8>(), n_blocks - 1 - i0, i0 < n_masked);
      // (KS_K_RELEASE=0: a release under a condition on the softmax keeps the PV wait below it)
      if (!K_EARLY_EXACT && keep_k) named_bar_arrive(o_done_bar, 256);
      if (!K_EARLY_EXACT && !keep_k && lane == 0 && __float_as_uint(row_sum[0]) != 0xffffffffu) mbar_arrive(k_empty(s));
      if (decltype(owed)::value) {
        wgmma_wait<0>();
        fence_regs(acc_o);
        if (lane == 0) mbar_arrive(v_empty(prev_s));
        if (half) pack_p<C, HS>(p_frag, acc_s); else pack_p<C>(p_frag, acc_s);
        store_tile(t_owed, owed_max, owed_sum, owed_top);
      } else {
        if (half) pack_p<C, HS>(p_frag, acc_s); else pack_p<C>(p_frag, acc_s);
      }
    };
    if (HALVES && is_half(n_blocks - 1 - i0)) {
      if (CAUSAL && !O_IN_K && t_owed >= 0) first_block(Flag<true>(), Flag<HALVES>()); else first_block(Flag<false>(), Flag<HALVES>());
    } else {
      if (CAUSAL && !O_IN_K && t_owed >= 0) first_block(Flag<true>(), Flag<false>()); else first_block(Flag<false>(), Flag<false>());
    }
    prev_s = vs;
    prev_ph = vph;

    // steady state: S(i) = Q K(i) is issued, then O += P(i-1) V(i-1); the softmax of S(i) runs
    // while the PV GEMM is in flight
    auto step = [&](int i, auto masked, auto first_pv, auto half_flag) -> bool {
      const int it = kv_it + i;
      s = it % C::K_STAGES;
      ph = (it / C::K_STAGES) & 1;
      vs = it % C::STAGES;
      vph = (it / C::STAGES) & 1;
      mbar_wait(k_full(s), ph);
      mbar_wait(v_full(prev_s), prev_ph);  // V(i-1) loaded before K(i) (or after: KS_K_AHEAD): one fence for both GEMMs
      constexpr bool MASKED = decltype(masked)::value, half = decltype(half_flag)::value;
      named_bar_sync(my_turn, 256);
      wgmma_fence();
      qk(half, k16 + s * (C::K_BYTES >> 4));
      wgmma_commit();
      issue_pv<C>(acc_o, p_frag, v16 + prev_s * (C::V_STAGE_BYTES >> 4), !decltype(first_pv)::value);
      wgmma_commit();
      named_bar_arrive(next_turn, 256);
      wgmma_wait<1>();
      fence_regs(acc_s);
      bool redo = false;
      constexpr bool EXACT_HERE = decltype(masked)::value || !FAST;
      constexpr bool K_EARLY = KS_K_RELEASE == 2 || (K_EARLY_EXACT && EXACT_HERE);
      const bool keep_k = O_IN_K && i == n_blocks - 1;  // the tile's last block: its K stage takes O
      if (K_EARLY && !keep_k && lane == 0) mbar_arrive(k_empty(s));
      if (K_EARLY && EXACT_HERE && keep_k) named_bar_arrive(o_done_bar, 256);  // (the fast softmax's: below)
      if constexpr (decltype(masked)::value || !FAST) {
        if (lane == 0 && i == n_blocks - 1) mbar_arrive(q_empty(qb));  // Q is read no more: the next tile's may load
        bool rescale;
        if constexpr (MASKED) {
          if (half) rescale = masked_softmax(Int<C::BN / 16>(), n_blocks - 1 - i, true);
          else rescale = masked_softmax(Int<C::BN / 8>(), n_blocks - 1 - i, true);
        } else {
          rescale = softmax_step<C, C::BN / 8, TOP_P>(acc_s, row_max, row_sum, corr, row_top, p.scale_log2);
        }
        // KS_K_RELEASE=0: K(i) is released after the softmax, under a condition on its result that always
        // holds, and ptxas then keeps the PV GEMM's wait below the first row's exponentials (measured
        // faster in v10, slower since: the early release, with the wait above them, gains 1.5-2.7% on
        // the tiles that take the exact step whole; NOTES.md, runs 44-46)
        if (!K_EARLY && keep_k) named_bar_arrive(o_done_bar, 256);
        if (!K_EARLY && !keep_k && lane == 0 && __float_as_uint(row_sum[0]) != 0xffffffffu) mbar_arrive(k_empty(s));
        wgmma_wait<0>();
        fence_regs(acc_o);
        if (lane == 0) mbar_arrive(v_empty(prev_s));  // V before the rescale: ptxas keeps the order
        if (rescale) rescale_o<C>(acc_o, corr);
      } else {
        // the fast softmax; a redo issues a GEMM, so the whole warpgroup must agree (named barrier
        // 4 + cw; 1..CWG are the ping-pong's)
        float blk[2];
        int blk_top[2];
        redo = warpgroup_any(4 + cw, !softmax_fast<C, TOP_P>(acc_s, row_max, blk, row_top, blk_top, p.scale_log2));
        if (!redo) {
          row_sum[0] += blk[0];
          row_sum[1] += blk[1];
          if (TOP_P) {  // (a block redone has stale P: its record is the exact step's)
            row_top[0] = fmaxf(row_top[0], __int_as_float(blk_top[0]));
            row_top[1] = fmaxf(row_top[1], __int_as_float(blk_top[1]));
          }
          if (keep_k) named_bar_arrive(o_done_bar, 256);  // the block stands: no redo reads K
          if (lane == 0) {
            if (!K_EARLY && !keep_k && __float_as_uint(row_sum[0]) != 0xffffffffu) mbar_arrive(k_empty(s));
            if (i == n_blocks - 1) mbar_arrive(q_empty(qb));
          }
        }
        wgmma_wait<0>();
        fence_regs(acc_o);
        if (lane == 0) mbar_arrive(v_empty(prev_s));
      }
      if (redo) return false;  // K(i) and Q kept for the redo
      if (half) pack_p<C, HS>(p_frag, acc_s); else pack_p<C>(p_frag, acc_s);
      prev_s = vs;
      prev_ph = vph;
      return true;
    };
    auto masked_step = [&](int i, auto first_pv) {
      if (HALVES && is_half(n_blocks - 1 - i)) step(i, Flag<true>(), first_pv, Flag<HALVES>());
      else step(i, Flag<true>(), first_pv, Flag<false>());
    };
    // rare (the row max grew too far for the fast softmax): S(i) again, then the exact step
    auto redo = [&](int i) {
      wgmma_fence();
      issue_qk<C>(acc_s, q, k16 + s * (C::K_BYTES >> 4));
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc_s);
      if (softmax_step<C, C::BN / 8, TOP_P>(acc_s, row_max, row_sum, corr, row_top, p.scale_log2)) rescale_o<C>(acc_o, corr);
      const bool keep_k = O_IN_K && i == n_blocks - 1;  // the tile's last block: its K stage takes O
      if (keep_k) named_bar_arrive(o_done_bar, 256);
      if (lane == 0) {
        if (!keep_k) mbar_arrive(k_empty(s));
        if (i == n_blocks - 1) mbar_arrive(q_empty(qb));
      }
      pack_p<C>(p_frag, acc_s);
      prev_s = vs;
      prev_ph = vph;
    };
    // the tile's first PV GEMM (step 1) starts O afresh: a copy of its own, so the steady loops carry no flag
    if (n_blocks > i0 + 1) {
      if (n_masked > i0 + 1)
        masked_step(i0 + 1, Flag<true>());
      else if (!step(i0 + 1, Flag<false>(), Flag<true>(), Flag<false>()) && FAST)
        redo(i0 + 1);
    }
    const int i_mask_end = max(i0 + 2, n_masked);
    for (int i = i0 + 2; i < i_mask_end; ++i) masked_step(i, Flag<false>());
    if constexpr (FAST) {
      for (int i = i_mask_end; i < n_blocks;) {  // the redo outside the inner loop (else ptxas spills)
        while (i < n_blocks && step(i, Flag<false>(), Flag<false>(), Flag<false>())) ++i;
        if (i < n_blocks) redo(i++);
      }
    } else {
      for (int i = i_mask_end; i < n_blocks; ++i) step(i, Flag<false>(), Flag<false>(), Flag<false>());
    }
    o_acc = n_blocks > i0 + 1;  // whether the owed PV GEMM accumulates
    if constexpr (O_IN_K) {  // the K stage of the tile's last block, and the other warpgroup's barrier
      o_stage = (kv_it + n_blocks - 1) % C::K_STAGES;
      o_wait_bar = 10 + 2 * (1 - cw) + (q_it & 1);
    }
    kv_it += n_blocks;
    ++q_it;
    t_owed = t;
    // non-causal: the epilogue at once measured faster (equal tiles); so did the causal d192/128
    // 128x128 tile, whose single Q buffer would hold the next tile's first S GEMM back (A/B run 22)
    if (AT_ONCE) settle_owed();
  }
  if (!O_IN_K && t_owed >= 0) settle_owed();
  if ((C::O_TMA || O_IN_K) && tid == 0) bulk_wait();  // the last stores complete before the CTA's shared memory goes
}

// ------------------------------------------------------------------------------ host side
typedef CUresult (*EncodeTiledFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiledFn encode_tiled() {
  static EncodeTiledFn fn = nullptr;
  if (fn == nullptr) {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &status) ==
            cudaSuccess &&
        status == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<EncodeTiledFn>(ptr);
  }
  return fn;
}

// a 4-D map over (headdim, seqlen, heads, batch) of a bf16 tensor; box = 64 columns (128-byte swizzle)
// or 32 columns (64-byte swizzle) x rows
static bool make_map(CUtensorMap* map, const void* base, int d, int seqlen, int heads, int batch,
                     int64_t seq_stride, int64_t head_stride, int64_t batch_stride, int box_rows, int box_cols = 64) {
  EncodeTiledFn fn = encode_tiled();
  if (fn == nullptr) return false;
  cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)seqlen, (cuuint64_t)heads, (cuuint64_t)batch};
  cuuint64_t strides[3] = {(cuuint64_t)seq_stride * 2, (cuuint64_t)head_stride * 2, (cuuint64_t)batch_stride * 2};
  cuuint32_t box[4] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows, 1, 1};
  cuuint32_t elem[4] = {1, 1, 1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(base), dims, strides, box, elem,
            CU_TENSOR_MAP_INTERLEAVE_NONE, box_cols == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class C, bool CAUSAL>
static int launch_as(const ks_attn_params& a, cudaStream_t stream) {
  CUtensorMap tq, tk, tv, to;
  if (!make_map(&tq, a.q, a.d_qk, a.seqlen_q, a.heads_q, a.batch, a.q_seq_stride, a.q_head_stride,
                a.q_batch_stride, C::Q_SPLIT ? 64 : C::BM) ||  // Q_SPLIT: a box per part
      !make_map(&tk, a.k, a.d_qk, a.seqlen_k, a.heads_kv, a.batch, a.k_seq_stride, a.k_head_stride,
                a.k_batch_stride, C::BN) ||
      !make_map(&tv, a.v, a.d_v, a.seqlen_k, a.heads_kv, a.batch, a.v_seq_stride, a.v_head_stride,
                a.v_batch_stride, C::BN, C::V_COLS) ||
      !make_map(&to, a.out, a.d_v, a.seqlen_q, a.heads_q, a.batch, a.o_seq_stride, a.o_head_stride,
                a.o_batch_stride, 64))
    return KS_ERR_CUDA;
  DeviceParams p;
  p.out = static_cast<__nv_bfloat16*>(a.out);
  p.lse = a.lse;
  p.o_batch_stride = a.o_batch_stride;
  p.o_seq_stride = a.o_seq_stride;
  p.o_head_stride = a.o_head_stride;
  p.lse_batch_stride = a.lse_batch_stride;
  p.lse_head_stride = a.lse_head_stride;
  p.seqlen_q = a.seqlen_q;
  p.seqlen_k = a.seqlen_k;
  p.heads_q = a.heads_q;
  p.batch = a.batch;
  p.group = a.heads_q / a.heads_kv;
  p.causal = a.causal;
  p.m_blocks = (a.seqlen_q + C::BM - 1) / C::BM;
  p.scale = a.softmax_scale;
  p.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  // K/V bytes of one (batch, head) pair; a section keeps about 24 MB of them in flight (L2: 50 MB)
  const long long kv_bytes = (long long)a.seqlen_k * (a.d_qk + a.d_v) * 2 / p.group;
  const long long bh = (long long)a.heads_q * a.batch;
  long long section = (24ll << 20) / (kv_bytes > 0 ? kv_bytes : 1);
  section = section < 1 ? 1 : (section > bh ? bh : section);
  while (bh % section != 0) --section;  // whole sections only
  if (!a.causal) section = 1;  // equal tiles: head-major order, the CTAs of a head share its K/V in L2
  p.section = (int)section;
  const int slot = static_cast<int>(next_tile_counter++ % TILE_COUNTERS);
  p.tile_slot = slot;
  auto kern = flash_fwd_sm90_kernel<C, CAUSAL>;
  if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES) != cudaSuccess)
    return KS_ERR_CUDA;
  static int num_sms = 0;
  if (num_sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return KS_ERR_CUDA;
  }
  const long long tiles = (long long)p.m_blocks * a.heads_q * a.batch;
  if (tiles > 0x7fffffffLL) return KS_ERR_UNSUPPORTED;
  p.div_per_section = fast_div(p.section * p.m_blocks);  // (at most the number of tiles)
  p.div_section = fast_div(p.section);
  p.div_heads = fast_div(a.heads_q);
  p.div_group = fast_div(p.group);
  dim3 grid((unsigned)(tiles < num_sms ? tiles : num_sms));
  p.tile_offset = grid.x - tile_counter_base[slot];
  kern<<<grid, C::THREADS, C::SMEM_BYTES, stream>>>(tq, tk, tv, to, p);
  if (cudaGetLastError() != cudaSuccess) return KS_ERR_CUDA;
  tile_counter_base[slot] += static_cast<unsigned>(tiles);
  return KS_OK;
}

template <class C>
static int launch(const ks_attn_params& a, cudaStream_t stream) {
  return a.causal ? launch_as<C, true>(a, stream) : launch_as<C, false>(a, stream);
}

static bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

extern "C" int ks_abi_version(void) { return KS_ABI_VERSION; }
extern "C" int ks_params_size(void) { return (int)sizeof(ks_attn_params); }

extern "C" int ks_attn_fwd(const ks_attn_params* pp, cudaStream_t stream) {
  if (pp == nullptr) return KS_ERR_INVALID;
  const ks_attn_params& a = *pp;
  if (a.dtype != 0) return KS_ERR_UNSUPPORTED;
  if (!a.q || !a.k || !a.v || !a.out) return KS_ERR_INVALID;
  if (a.batch <= 0 || a.seqlen_q <= 0 || a.seqlen_k <= 0 || a.heads_q <= 0 || a.heads_kv <= 0) return KS_ERR_INVALID;
  if (a.heads_q % a.heads_kv != 0) return KS_ERR_INVALID;
  // TMA: 16-byte aligned bases and strides that are multiples of 16 bytes; contiguous rows
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || !aligned16(a.out)) return KS_ERR_UNSUPPORTED;
  const int64_t strides[] = {a.q_batch_stride, a.q_seq_stride, a.q_head_stride, a.k_batch_stride,
                             a.k_seq_stride,   a.k_head_stride, a.v_batch_stride, a.v_seq_stride,
                             a.v_head_stride,  a.o_seq_stride, a.o_batch_stride, a.o_head_stride};
  for (int64_t s : strides)
    if (s % 8 != 0 || s <= 0) return KS_ERR_UNSUPPORTED;
#if KS_DECODE_EXACT
  // a few query rows per head (decoding): the loads bound the time, so the exact step with a reference
  // moved to every new row max costs nothing there and leaves no P of a row's largest key rounded
  if (a.seqlen_q <= KS_DECODE_ROWS) {
    if (a.d_qk == 64 && a.d_v == 64) return launch<Config<64, 64, 128, 2, 2, 0, FAST_NEVER>>(a, stream);
    if (a.d_qk == 96 && a.d_v == 96) return launch<Config<96, 96, 128, 2, 2, 0, FAST_NEVER>>(a, stream);
    if (a.d_qk == 128 && a.d_v == 128) return launch<Config<128, 128, 128, 2, 2, 0, FAST_NEVER>>(a, stream);
    if (a.d_qk == 256 && a.d_v == 256) return launch<Config<256, 256, 80, 2, 2, 0, FAST_NEVER>>(a, stream);
    if (a.d_qk == 192 && a.d_v == 128) return launch<Config<192, 128, 128, 2, 2, 0, FAST_NEVER>>(a, stream);
  }
#endif
  // the fast softmax where it measured faster (kernels/hopper/NOTES.md, v15 and v17): not for causal d64
  // with up to 1024 keys (there two consumer warpgroups and the exact step: A/B run 18), d256, the
  // non-causal 192x112 d96 tile and causal d192/128 below 1024 keys or on 192x80 (slower there: NOTES,
  // v26, v28c and runs 53-55)
  if (a.d_qk == 64 && a.d_v == 64)
    return a.causal && a.seqlen_k <= KS_D64_CAUSAL_SHORT_TO ? launch<Config<64, 64, 128, 2, 2, P_LOG2, FAST_NON_CAUSAL>>(a, stream)
                                          : launch<Config<64, 64, 128, 2, 3>>(a, stream);
  // long K/V: three consumer warpgroups (192 query rows) hide more of the softmax; short K/V: two,
  // whose 128-row tiles leave fewer SMs idle at the end (thresholds measured, kernels/hopper/NOTES.md)
  if (a.d_qk == 96 && a.d_v == 96)
    return a.seqlen_k >= (a.causal ? KS_D96_CAUSAL_LONG_FROM : KS_D96_LONG_FROM) ? launch<Config<96, 96, 112, 2, 3, P_LOG2, FastSoftmax(KS_D96_LONG_FAST)>>(a, stream)
                                                 : launch<Config<96, 96, 128, 2, 2>>(a, stream);
  if (a.d_qk == 128 && a.d_v == 128) {
    using Wide = Config<128, 128, 80, 2, 3, P_LOG2, FAST_ALWAYS, true>;  // (only where a knob below asks for it)
    const int group = a.heads_q / a.heads_kv;
    if (a.causal && a.seqlen_k >= (group >= KS_Q_AHEAD_MIN_GROUP ? KS_D128_CAUSAL_LONG_FROM : KS_D128_CAUSAL_LONG_FROM_MHA)) {
      if constexpr (KS_D128_WIDE_PV >= 1) return launch<Wide>(a, stream);
      else return launch<Config<128, 128, 80, 2, 3, P_LOG2, KS_D128_FAST>>(a, stream);
    }
    if (!a.causal && a.seqlen_k >= KS_D128_LONG_FROM) {
      if constexpr (KS_D128_WIDE_PV >= 2) return launch<Wide>(a, stream);
      else return launch<Config<128, 128, 80, 2, 3, P_LOG2, KS_D128_FAST>>(a, stream);
    }
    if constexpr (KS_D128_WIDE_SHORT) return launch<Config<128, 128, 128, 2, 2, P_LOG2, FAST_ALWAYS, true>>(a, stream);
    else return launch<Config<128, 128, 128, 2, 2, P_LOG2, KS_D128_FAST>>(a, stream);
  }
  if (a.d_qk == 256 && a.d_v == 256) return launch<Config<256, 256, 80, 2, 2, P_LOG2, FastSoftmax(KS_D256_FAST)>>(a, stream);
  if (a.d_qk == 192 && a.d_v == 128 && a.causal && a.seqlen_k >= KS_D192_CAUSAL_FAST_FROM &&
      a.seqlen_k < KS_D192_CAUSAL_LONG_FROM)
    return launch<Config<192, 128, 128, 2, 2, P_LOG2, FAST_ALWAYS>>(a, stream);
  if (a.d_qk == 192 && a.d_v == 128)
    return a.seqlen_k >= (a.causal ? KS_D192_CAUSAL_LONG_FROM : KS_D192_LONG_FROM) ? launch<Config<192, 128, 80, 2, 3, P_LOG2, FastSoftmax(KS_D192_FAST)>>(a, stream) : launch<Config<192, 128, 128, 2, 2, P_LOG2, FastSoftmax(KS_D192_FAST)>>(a, stream);
  return KS_ERR_UNSUPPORTED;
}
