// flash_fwd_sm100.cu -- a single-file FlashAttention forward kernel for Blackwell (sm_100a, B200).
//
// STATUS: NOT YET RUN ON HARDWARE. No Blackwell GPU was available while it was written.
//   Checked (tests/test_kernels.py, tests/test_blackwell.py): it compiles for sm_100a with nvcc 13.0
//   with no spills, no stack and no ptxas warnings; the PTX holds tcgen05.alloc/mma/commit/ld/st/wait
//   and cp.async.bulk.tensor; the descriptors it passes to every tcgen05.mma decode (with the PTX
//   ISA's bit layouts) to the design below; it follows the dependency-free rule; compile-time asserts
//   hold the tensor-memory column budget (<= 512, a power of two >= 32), the shared-memory budget
//   (232448 bytes per CTA) and the register split.
//   Taken unchanged from the Hopper kernel (kernels/hopper/flash_fwd_sm90.cu, correct on 182/182
//   scenarios and 316/316 extended cases on an H200): the contract (struct, symbols, error codes,
//   input validation), the TMA tensor maps (4-D over headdim/seqlen/heads/batch, 128-byte swizzle,
//   64-column chunks), the persistent tile order, the producer's load order, the masks (sequence
//   tail; causal bottom-right: column j visible from row i iff j <= i + seqlen_k - seqlen_q), the
//   online softmax in the exp2 domain with the scale in one FFMA, rows with nothing visible giving
//   0 and LSE -inf, the GQA mapping kv_head = h / (heads_q / heads_kv), the LSE formula.
//   Unverified (new here, never executed): the tcgen05 instruction and shared-memory descriptors
//   (K-major Q/K, MN-major V), the TMEM layouts (S, P as packed bf16 in S's columns, O), the
//   mbarrier protocol between the warp roles, setmaxnreg balance at 512 threads, and the
//   assumption that tcgen05.mma operations issued by one thread execute in issue order (S(i+1) is
//   written into the TMEM columns that P(i) occupies, after O += P(i) V(i) was issued).
//   First things to check on a B200: kernels/blackwell/NOTES.md.
//
// DESIGN
//   Persistent grid of one CTA per SM, tiles (m_block, head, batch) taken round-robin in the Hopper
//   kernel's head-major order. A CTA of 512 threads (16 warps) computes BM = 128 * QT query rows:
//     warps 0-3, 4-7   softmax: one warpgroup per 128-row Q tile (QT = 2; 1 at d256); thread r of a
//                      warpgroup owns row r (TMEM lane r). It reads S from TMEM (tcgen05.ld),
//                      masks, keeps the row max and sum, writes P as packed bf16 over the first BN/2
//                      columns of S (tcgen05.st) and hands the O correction factor to ...
//     warps 8-11       correction + epilogue: rescales O in TMEM when the row max moved (skipped
//                      when a warp's 32 factors are all 1), and at the end of a tile normalizes O
//                      and stores it and the LSE to global memory straight from registers. (No
//                      separate TMA-store epilogue warp: one warp cannot read all 128 TMEM lanes,
//                      and an O staging buffer does not fit beside the K/V stages at d192.)
//     warp 12          MMA issue (one thread): S_t = Q_t K^T (tcgen05.mma kind::f16, both operands
//                      from shared memory), O_t += P_t V (A = P from TMEM, B = V from shared memory,
//                      MN-major). Order per KV block i: PV_0(i), S_0(i+1), PV_1(i), S_1(i+1), so the
//                      tensor core runs one tile's GEMMs while the other tile's softmax runs.
//                      tcgen05.commit signals the mbarriers. It also allocates and frees TMEM.
//     warp 13          TMA loads (one thread): Q once per tile, K and V through separate
//                      STAGES-deep full/empty mbarrier pipelines, as in the Hopper kernel.
//     warps 14-15      idle (they give their registers away).
//   Tensor memory (128 lanes x 512 columns of 32 bits): S_t at columns t*BN (fp32, BN columns; P_t
//   over its first BN/2), O_t at QT*BN + t*DV_PAD (fp32). P stays in TMEM because the A-from-TMEM
//   form of tcgen05.mma reads it there: no shared-memory round trip, no P buffer (32 KB per Q tile
//   at BN 128) and no generic-to-async proxy fence; S is read and P written by the same thread.
//   KV blocks are visited last to first, so the masked blocks come first.
//   Tiles (BM x BN, stages): d64 256x128 (3); d96 256x128 (2; d padded to 128 in shared memory, in
//   TMEM and in the PV GEMM); d128 256x128 (2); d192/128 256x128 (1); d256 128x128 (1).
//
// MEASURED STANDING: none (not run).
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

// register reallocation between warpgroups
template <int N> __device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// tensor memory: allocation (one whole warp), and the fences that order tcgen05 operations
// against thread synchronization (mbarriers, bar.sync)
template <int NCOLS> __device__ __forceinline__ void tmem_alloc(uint32_t dst_slot) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(dst_slot), "n"(NCOLS)
               : "memory");
}
__device__ __forceinline__ void tmem_relinquish() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
}
template <int NCOLS> __device__ __forceinline__ void tmem_dealloc(uint32_t taddr) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(taddr), "n"(NCOLS) : "memory");
}
__device__ __forceinline__ void tc_fence_before_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
}
__device__ __forceinline__ void tc_fence_after_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
}

// tcgen05.mma, kind::f16 (bf16 inputs, fp32 accumulator in TMEM), issued by one thread.
// D(tmem) = (accumulate ? D : 0) + A(smem descriptor) * B(smem descriptor)
__device__ __forceinline__ void umma_ss(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                        int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n" ::"r"(d_tmem),
      "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)
      : "memory");
}
// D(tmem) = (accumulate ? D : 0) + A(tmem) * B(smem descriptor)
__device__ __forceinline__ void umma_ts(uint32_t d_tmem, uint32_t a_tmem, uint64_t b_desc, uint32_t idesc,
                                        int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], [%1], %2, %3, p;\n}\n" ::"r"(d_tmem),
      "r"(a_tmem), "l"(b_desc), "r"(idesc), "r"(accumulate)
      : "memory");
}
// the mbarrier arrives once every tcgen05 operation this thread issued so far has completed
__device__ __forceinline__ void umma_commit(uint32_t bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(bar)
               : "memory");
}

// TMEM <-> registers, 32x32b shape: thread i of the warp reads/writes lane (32 * (warp % 4) + i),
// x32 = 32 consecutive 32-bit columns
__device__ __forceinline__ void tmem_ld32(uint32_t taddr, float (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, [%32];\n"
      : "=f"(r[0]), "=f"(r[1]), "=f"(r[2]), "=f"(r[3]), "=f"(r[4]), "=f"(r[5]), "=f"(r[6]), "=f"(r[7]),
        "=f"(r[8]), "=f"(r[9]), "=f"(r[10]), "=f"(r[11]), "=f"(r[12]), "=f"(r[13]), "=f"(r[14]), "=f"(r[15]),
        "=f"(r[16]), "=f"(r[17]), "=f"(r[18]), "=f"(r[19]), "=f"(r[20]), "=f"(r[21]), "=f"(r[22]), "=f"(r[23]),
        "=f"(r[24]), "=f"(r[25]), "=f"(r[26]), "=f"(r[27]), "=f"(r[28]), "=f"(r[29]), "=f"(r[30]), "=f"(r[31])
      : "r"(taddr)
      : "memory");
}
__device__ __forceinline__ void tmem_st32(uint32_t taddr, const uint32_t (&r)[32]) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], {"
      "%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16,"
      "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32"
      "};\n" ::"r"(taddr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]), "r"(r[8]),
      "r"(r[9]), "r"(r[10]), "r"(r[11]), "r"(r[12]), "r"(r[13]), "r"(r[14]), "r"(r[15]), "r"(r[16]), "r"(r[17]),
      "r"(r[18]), "r"(r[19]), "r"(r[20]), "r"(r[21]), "r"(r[22]), "r"(r[23]), "r"(r[24]), "r"(r[25]), "r"(r[26]),
      "r"(r[27]), "r"(r[28]), "r"(r[29]), "r"(r[30]), "r"(r[31])
      : "memory");
}
__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory"); }
// registers a tcgen05.ld wrote hold their values only after tcgen05.wait::ld: keep the compiler from
// moving their uses above the wait
template <int N> __device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;\n" ::: "memory"); }

// sm100 shared memory matrix descriptor: start address, leading and stride byte offsets (>> 4),
// bits 46-47 = 1 (the "version" sm90 does not have), layout type 2 = 128-byte swizzle in bits 61-63
// (sm90 puts 128-byte swizzle at 1 << 62). For K-major operands the stride offset is the step
// between 8-row groups (1024 B) and the leading offset is unused; for MN-major operands the leading
// offset is the step between 64-column chunks and the stride offset the step between 8-row groups.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32) | (1ull << 46) | (2ull << 61);
}

// instruction descriptor of tcgen05.mma kind::f16: D fp32 (bits 4-5 = 1), A and B bf16 (bits 7-9
// and 10-12 = 1), A K-major (bit 15 = 0), B K-major or MN-major (bit 16), N >> 3 in bits 17-22,
// M >> 4 in bits 24-28
__host__ __device__ constexpr uint32_t idesc_bf16(int m, int n, bool b_mn_major) {
  return (1u << 4) | (1u << 7) | (1u << 10) | ((b_mn_major ? 1u : 0u) << 16) | ((uint32_t)(n >> 3) << 17) |
         ((uint32_t)(m >> 4) << 24);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// ------------------------------------------------------------------------------ configuration
__host__ __device__ constexpr int pow2_at_least(int n, int p = 32) { return p >= n ? p : pow2_at_least(n, 2 * p); }

template <int DQK_, int DV_, int BN_, int STAGES_, int QT_>
struct Config {
  static constexpr int DQK = DQK_, DV = DV_;
  static constexpr int DQK_PAD = (DQK + 63) / 64 * 64;  // shared memory holds 64-column chunks
  static constexpr int DV_PAD = (DV + 63) / 64 * 64;
  static constexpr int QK_CHUNKS = DQK_PAD / 64, V_CHUNKS = DV_PAD / 64;
  static constexpr int QT = QT_;                        // Q tiles of 128 rows, one softmax warpgroup each
  static constexpr int BM = 128 * QT, BN = BN_, STAGES = STAGES_;
  static constexpr int QK_STEPS = DQK / 16;             // k16 steps of S = Q K^T (real columns only)
  static constexpr int PV_STEPS = BN / 16;
  static constexpr int Q_BYTES = BM * DQK_PAD * 2;
  static constexpr int K_BYTES = BN * DQK_PAD * 2;      // one stage
  static constexpr int V_BYTES = BN * DV_PAD * 2;
  static constexpr int TILE_BYTES = Q_BYTES + STAGES * (K_BYTES + V_BYTES);
  static constexpr int XFER_BYTES = QT * 128 * 4 * 3;   // softmax -> correction: factor, row max, row sum
  static constexpr int NUM_BARS = 2 + 4 * STAGES + 6 * QT;
  static constexpr int BAR_BYTES = 8 * NUM_BARS + 8;    // and the slot tcgen05.alloc writes the address to
  static constexpr int SMEM_BYTES = TILE_BYTES + XFER_BYTES + BAR_BYTES + 1024;  // slack for 1024-B alignment
  static constexpr int THREADS = 512;
  static constexpr int WARP_CORRECTION = 8, WARP_MMA = 12, WARP_LOAD = 13;
  // tensor memory columns (32-bit): S_t, then O_t
  __host__ __device__ static constexpr int S_COL(int t) { return t * BN; }
  __host__ __device__ static constexpr int O_COL(int t) { return QT * BN + t * DV_PAD; }
  static constexpr int TMEM_USED = QT * (BN + DV_PAD);
  static constexpr int TMEM_COLS = pow2_at_least(TMEM_USED);
  static constexpr uint32_t IDESC_QK = idesc_bf16(128, BN, false);     // K is K-major
  static constexpr uint32_t IDESC_PV = idesc_bf16(128, DV_PAD, true);  // V is MN-major
  // registers per thread after setmaxnreg (512 threads start at 128 each)
  static constexpr int REGS_SOFTMAX = QT == 2 ? 200 : 240, REGS_CORRECTION = 64, REGS_OTHER = 48;
  static_assert(QT == 1 || QT == 2, "one or two Q tiles");
  // setmaxnreg.inc draws only on the CTA's launch allocation (65536 / 512 = 128 per thread) and what
  // the other warpgroups released: more than that and the increase waits forever
  static_assert(QT * 128 * REGS_SOFTMAX + (2 - QT) * 128 * REGS_OTHER + 128 * REGS_CORRECTION + 128 * REGS_OTHER <=
                    (65536 / THREADS) * THREADS,
                "register split exceeds the launch allocation");
  static_assert(BN % 64 == 0 && BN <= 256, "BN: an MMA N, and P stored 32 columns at a time");
  static_assert(DV_PAD % 16 == 0 && DV_PAD <= 256, "DV_PAD: an MMA N");
  static_assert(DQK % 16 == 0 && DV % 32 == 0, "head dimensions");
  static_assert(BM <= 256, "a TMA box has at most 256 rows");
  static_assert(TMEM_USED <= 512, "tensor memory has 512 columns");
  static_assert(TMEM_COLS >= 32 && TMEM_COLS <= 512 && (TMEM_COLS & (TMEM_COLS - 1)) == 0,
                "tcgen05.alloc takes a power of two >= 32 columns");
  static_assert(SMEM_BYTES <= 232448, "shared memory budget of an sm100 CTA");
};

struct DeviceParams {
  __nv_bfloat16* out;
  float* lse;
  int64_t o_batch_stride, o_seq_stride, o_head_stride;
  int64_t lse_batch_stride, lse_head_stride;
  int seqlen_q, seqlen_k, heads_q, group, batch;  // group = heads_q / heads_kv
  int causal, m_blocks;
  int o_vec16;                                    // every output row is 16-byte aligned
  float scale, scale_log2;
};

// ------------------------------------------------------------------------------ the kernel
// Tiles are (m_block, head, batch) triples. A persistent grid of one CTA per SM takes them
// round-robin in head-major order, the m_blocks of one head adjacent and longest (causal) first:
// the CTAs running at one time share the K/V of a few heads in L2 instead of streaming all of them.
struct Tile {
  int m_block, h, b;
};
__device__ __forceinline__ Tile tile_at(int t, const DeviceParams& p) {
  const int bh = t / p.m_blocks;
  return Tile{p.m_blocks - 1 - t % p.m_blocks, bh % p.heads_q, bh / p.heads_q};
}

template <class C>
__device__ __forceinline__ int kv_blocks(int m0, const DeviceParams& p) {
  const int n_end = p.causal ? min(p.seqlen_k, m0 + C::BM + p.seqlen_k - p.seqlen_q) : p.seqlen_k;
  return n_end > 0 ? (n_end + C::BN - 1) / C::BN : 0;
}

// one thread holds one row of S. Column col = n0 + j is masked iff
// col >= seqlen_k || (causal && col > row + diag), i.e. iff j >= the limit below (one compare each)
template <class C>
__device__ __forceinline__ void mask_scores(float (&acc_s)[C::BN], int n0, int row, int diag, const DeviceParams& p) {
  const int limit = p.causal ? min(p.seqlen_k, row + diag + 1) - n0 : p.seqlen_k - n0;
#pragma unroll
  for (int j = 0; j < C::BN; ++j)
    if (j >= limit) acc_s[j] = -INFINITY;
}

// online softmax of one row of S, first half: the new row max; returns the O correction factor
template <class C>
__device__ __forceinline__ float softmax_rescale(const float (&acc_s)[C::BN], float& row_max, float& row_sum,
                                                 float& neg_max_scaled, float scale_log2) {
  float mx = row_max;
#pragma unroll
  for (int j = 0; j < C::BN; ++j) mx = fmaxf(mx, acc_s[j]);
  const float m_use = mx == -INFINITY ? 0.f : mx;  // nothing visible yet: exp2(-inf - 0) = 0, not NaN
  const float corr = row_max == -INFINITY ? 1.f : exp2f((row_max - m_use) * scale_log2);
  row_max = mx;
  neg_max_scaled = -m_use * scale_log2;
  row_sum *= corr;
  return corr;
}

// second half, 64 columns at a time: P = exp2(S * scale_log2 - max * scale_log2) as packed bf16
// pairs, and the row sum (of the fp32 values)
template <class C>
__device__ __forceinline__ void softmax_exp(const float (&acc_s)[C::BN], int c, float& row_sum, float neg_max_scaled,
                                            float scale_log2, uint32_t (&p_frag)[32]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const float v0 = exp2f(fmaf(acc_s[c * 64 + 2 * j], scale_log2, neg_max_scaled));
    const float v1 = exp2f(fmaf(acc_s[c * 64 + 2 * j + 1], scale_log2, neg_max_scaled));
    row_sum += v0;
    row_sum += v1;
    p_frag[j] = pack_bf16(v0, v1);
  }
}

// S_t = Q_t K^T: M = 128 rows of Q tile t, N = BN, K = DQK in k16 steps; both operands K-major in
// 128-byte-swizzled 64-column chunks
template <class C>
__device__ __forceinline__ void issue_qk(uint32_t tmem_s, uint32_t sQ_tile, uint32_t sK_stage) {
#pragma unroll 1  // unrolled, the loop-invariant Q descriptors would be hoisted into the MMA warp's 48 registers
  for (int kk = 0; kk < C::QK_STEPS; ++kk) {
    const uint32_t a = sQ_tile + (kk / 4) * C::BM * 128 + (kk % 4) * 32;
    const uint32_t bk = sK_stage + (kk / 4) * C::BN * 128 + (kk % 4) * 32;
    umma_ss(tmem_s, smem_desc(a, 16, 1024), smem_desc(bk, 16, 1024), C::IDESC_QK, kk > 0);
  }
}

// O_t (+)= P_t V: A = P from TMEM (16 bf16 = 8 columns per k16 step), B = V MN-major
template <class C>
__device__ __forceinline__ void issue_pv(uint32_t tmem_o, uint32_t tmem_p, uint32_t sV_stage, int accumulate) {
#pragma unroll 1
  for (int kk = 0; kk < C::PV_STEPS; ++kk)
    umma_ts(tmem_o, tmem_p + kk * 8, smem_desc(sV_stage + kk * 16 * 128, C::BN * 128, 1024), C::IDESC_PV,
            accumulate || kk > 0);
}

// 32 output columns of one row, scaled, as bf16
__device__ __forceinline__ void store_row32(__nv_bfloat16* dst, const float (&v)[32], float inv, bool vec16) {
  uint32_t packed[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) packed[j] = pack_bf16(v[2 * j] * inv, v[2 * j + 1] * inv);
  if (vec16) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      reinterpret_cast<uint4*>(dst)[j] =
          make_uint4(packed[4 * j], packed[4 * j + 1], packed[4 * j + 2], packed[4 * j + 3]);
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) reinterpret_cast<uint32_t*>(dst)[j] = packed[j];
  }
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    flash_fwd_sm100_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                           const __grid_constant__ CUtensorMap tm_v, const DeviceParams p) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem_base = (smem_u32(smem_raw) + 1023) & ~1023u;
  uint8_t* const smem_gen = smem_raw + (smem_base - smem_u32(smem_raw));  // the same address, generic
  const uint32_t sQ = smem_base;
  const uint32_t sK = sQ + C::Q_BYTES;                    // + stage * K_BYTES
  const uint32_t sV = sK + C::STAGES * C::K_BYTES;        // + stage * V_BYTES
  float* const corr_buf = reinterpret_cast<float*>(smem_gen + C::TILE_BYTES);  // [QT][128] each
  float* const max_buf = corr_buf + C::QT * 128;
  float* const sum_buf = max_buf + C::QT * 128;
  const uint32_t bars = sQ + C::TILE_BYTES + C::XFER_BYTES;
  const uint32_t q_full = bars, q_empty = bars + 8;
  auto k_full = [&](int s) { return bars + 8 * (2 + s); };
  auto k_empty = [&](int s) { return bars + 8 * (2 + C::STAGES + s); };
  auto v_full = [&](int s) { return bars + 8 * (2 + 2 * C::STAGES + s); };
  auto v_empty = [&](int s) { return bars + 8 * (2 + 3 * C::STAGES + s); };
  // per Q tile t: S ready (MMA), P written and O rescaled or free (softmax + correction), correction
  // factor ready (softmax), O final (MMA), row statistics full / empty (softmax <-> epilogue)
  auto s_full = [&](int t) { return bars + 8 * (2 + 4 * C::STAGES + t); };
  auto p_o_ready = [&](int t) { return bars + 8 * (2 + 4 * C::STAGES + C::QT + t); };
  auto corr_full = [&](int t) { return bars + 8 * (2 + 4 * C::STAGES + 2 * C::QT + t); };
  auto o_full = [&](int t) { return bars + 8 * (2 + 4 * C::STAGES + 3 * C::QT + t); };
  auto stats_full = [&](int t) { return bars + 8 * (2 + 4 * C::STAGES + 4 * C::QT + t); };
  auto stats_empty = [&](int t) { return bars + 8 * (2 + 4 * C::STAGES + 5 * C::QT + t); };
  const uint32_t tmem_slot = bars + 8 * C::NUM_BARS;

  const int num_tiles = p.m_blocks * p.heads_q * p.batch;
  const int diag = p.seqlen_k - p.seqlen_q;  // causal: column j visible from row i iff j <= i + diag
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = warp / 4;
  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    mbar_init(q_empty, 1);  // tcgen05.commit
    for (int s = 0; s < C::STAGES; ++s) {
      mbar_init(k_full(s), 1);
      mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), 1);
      mbar_init(v_empty(s), 1);
    }
    for (int t = 0; t < C::QT; ++t) {
      mbar_init(s_full(t), 1);
      mbar_init(p_o_ready(t), 256);  // 128 softmax + 128 correction threads
      mbar_init(corr_full(t), 128);
      mbar_init(o_full(t), 1);
      mbar_init(stats_full(t), 128);
      mbar_init(stats_empty(t), 128);
    }
    fence_barrier_init();
    fence_proxy_async();
  }
  if (warp == C::WARP_MMA) {
    tmem_alloc<C::TMEM_COLS>(tmem_slot);
    tmem_relinquish();
  }
  tc_fence_before_sync();
  __syncthreads();
  tc_fence_after_sync();
  const uint32_t tmem = *reinterpret_cast<volatile uint32_t*>(smem_gen + (tmem_slot - smem_base));

  if (wg == 3) {
    regs_dealloc<C::REGS_OTHER>();
    if (warp == C::WARP_LOAD && lane == 0) {
      // ---------------------------------------------------------------- producer (TMA)
      int kv_it = 0, q_it = 0;
      for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
        const Tile tile = tile_at(t, p);
        const int m0 = tile.m_block * C::BM, hk = tile.h / p.group;
        const int n_blocks = kv_blocks<C>(m0, p);
        if (n_blocks == 0) continue;
        mbar_wait(q_empty, (q_it & 1) ^ 1);
        mbar_expect_tx(q_full, C::Q_BYTES);
#pragma unroll
        for (int c = 0; c < C::QK_CHUNKS; ++c)
          tma_load_4d(sQ + c * C::BM * 128, &tm_q, q_full, c * 64, m0, tile.h, tile.b);
        for (int i = 0; i < n_blocks; ++i, ++kv_it) {
          const int n_block = n_blocks - 1 - i, s = kv_it % C::STAGES;
          const uint32_t ph = (kv_it / C::STAGES) & 1;
          mbar_wait(k_empty(s), ph ^ 1);
          mbar_expect_tx(k_full(s), C::K_BYTES);
#pragma unroll
          for (int c = 0; c < C::QK_CHUNKS; ++c)
            tma_load_4d(sK + s * C::K_BYTES + c * C::BN * 128, &tm_k, k_full(s), c * 64, n_block * C::BN, hk,
                        tile.b);
          mbar_wait(v_empty(s), ph ^ 1);
          mbar_expect_tx(v_full(s), C::V_BYTES);
#pragma unroll
          for (int c = 0; c < C::V_CHUNKS; ++c)
            tma_load_4d(sV + s * C::V_BYTES + c * C::BN * 128, &tm_v, v_full(s), c * 64, n_block * C::BN, hk,
                        tile.b);
        }
        ++q_it;
      }
    } else if (warp == C::WARP_MMA && lane == 0) {
      // ---------------------------------------------------------------- MMA issue
      // per KV block i: PV_0(i), S_0(i+1), PV_1(i), S_1(i+1). S_t(i+1) overwrites the columns P_t(i)
      // occupies; it is issued after PV_t(i), and tcgen05.mma operations from one thread execute in
      // order, so PV_t(i) reads P_t(i) first.
      int kv_it = 0, q_it = 0, blk_it = 0;
      for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
        const Tile tile = tile_at(t, p);
        const int n_blocks = kv_blocks<C>(tile.m_block * C::BM, p);
        if (n_blocks == 0) continue;
        mbar_wait(q_full, q_it & 1);
        int s = kv_it % C::STAGES;
        mbar_wait(k_full(s), (kv_it / C::STAGES) & 1);
        tc_fence_after_sync();
#pragma unroll
        for (int q = 0; q < C::QT; ++q) {
          issue_qk<C>(tmem + C::S_COL(q), sQ + q * 128 * 128, sK + s * C::K_BYTES);
          umma_commit(s_full(q));
        }
        umma_commit(k_empty(s));
        if (n_blocks == 1) umma_commit(q_empty);
        for (int i = 0; i < n_blocks; ++i, ++blk_it) {
          const int it = kv_it + i;
          const int vs = it % C::STAGES, ks = (it + 1) % C::STAGES;
          mbar_wait(v_full(vs), (it / C::STAGES) & 1);
#pragma unroll
          for (int q = 0; q < C::QT; ++q) {
            mbar_wait(p_o_ready(q), blk_it & 1);  // P_t(i) written, O_t rescaled (or free at i = 0)
            tc_fence_after_sync();
            issue_pv<C>(tmem + C::O_COL(q), tmem + C::S_COL(q), sV + vs * C::V_BYTES, i > 0);
            if (q == C::QT - 1) umma_commit(v_empty(vs));
            if (i == n_blocks - 1) {
              umma_commit(o_full(q));
              continue;
            }
            if (q == 0) {
              mbar_wait(k_full(ks), ((it + 1) / C::STAGES) & 1);
              tc_fence_after_sync();
            }
            issue_qk<C>(tmem + C::S_COL(q), sQ + q * 128 * 128, sK + ks * C::K_BYTES);
            umma_commit(s_full(q));
            if (q == C::QT - 1) {
              umma_commit(k_empty(ks));
              if (i + 1 == n_blocks - 1) umma_commit(q_empty);
            }
          }
        }
        kv_it += n_blocks;
        ++q_it;
      }
    }
  } else if (wg == 2) {
    // ------------------------------------------------------------------ correction + epilogue
    regs_dealloc<C::REGS_CORRECTION>();
    const int tid = threadIdx.x % 128;
    const uint32_t lane_base = static_cast<uint32_t>(32 * (warp % 4)) << 16;
    int q_it = 0, corr_it = 0;
    for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
      const Tile tile = tile_at(t, p);
      const int m0 = tile.m_block * C::BM;
      const int n_blocks = kv_blocks<C>(m0, p);
      __nv_bfloat16* o = p.out + tile.b * p.o_batch_stride + tile.h * p.o_head_stride;
      float* lse = p.lse != nullptr ? p.lse + tile.b * p.lse_batch_stride + tile.h * p.lse_head_stride : nullptr;
      if (n_blocks == 0) {  // nothing visible from any row of the tile
        float zero[32];
#pragma unroll
        for (int j = 0; j < 32; ++j) zero[j] = 0.f;
        for (int q = 0; q < C::QT; ++q) {
          const int row = m0 + q * 128 + tid;
          if (row >= p.seqlen_q) continue;
#pragma unroll
          for (int c = 0; c < C::DV / 32; ++c) store_row32(o + row * p.o_seq_stride + c * 32, zero, 0.f, p.o_vec16);
          if (lse != nullptr) lse[row] = -INFINITY;
        }
        continue;
      }
      // block 0 writes O without reading it: O is free once the previous tile's epilogue (below,
      // finished with tcgen05.wait::ld) read it
      tc_fence_before_sync();
#pragma unroll
      for (int q = 0; q < C::QT; ++q) mbar_arrive(p_o_ready(q));
      for (int i = 1; i < n_blocks; ++i, ++corr_it) {
#pragma unroll
        for (int q = 0; q < C::QT; ++q) {
          // the factor of block i is written after S_t(i) completed, so O += P(i-1) V(i-1) did too
          mbar_wait(corr_full(q), corr_it & 1);
          const float corr = corr_buf[q * 128 + tid];
          tc_fence_after_sync();
          if (__any_sync(0xffffffff, corr != 1.f)) {  // warp-uniform: tcgen05.ld/st are warp-wide
            const uint32_t t_o = tmem + lane_base + C::O_COL(q);
#pragma unroll 1
            for (int c = 0; c < C::DV_PAD / 32; ++c) {
              float v[32];
              uint32_t w[32];
              tmem_ld32(t_o + c * 32, v);
              tmem_wait_ld();
              fence_regs(v);
#pragma unroll
              for (int j = 0; j < 32; ++j) w[j] = __float_as_uint(v[j] * corr);
              tmem_st32(t_o + c * 32, w);
            }
            tmem_wait_st();
          }
          tc_fence_before_sync();
          mbar_arrive(p_o_ready(q));
        }
      }
      // epilogue: normalize, store O and LSE; empty rows give 0 and LSE -inf
#pragma unroll
      for (int q = 0; q < C::QT; ++q) {
        mbar_wait(o_full(q), q_it & 1);
        mbar_wait(stats_full(q), q_it & 1);
        tc_fence_after_sync();
        const float row_max = max_buf[q * 128 + tid], row_sum = sum_buf[q * 128 + tid];
        mbar_arrive(stats_empty(q));
        const float inv = row_sum > 0.f ? 1.f / row_sum : 0.f;
        const int row = m0 + q * 128 + tid;
        const uint32_t t_o = tmem + lane_base + C::O_COL(q);
#pragma unroll 1
        for (int c = 0; c < C::DV / 32; ++c) {
          float v[32];
          tmem_ld32(t_o + c * 32, v);
          tmem_wait_ld();
          fence_regs(v);
          if (row < p.seqlen_q) store_row32(o + row * p.o_seq_stride + c * 32, v, inv, p.o_vec16);
        }
        if (lse != nullptr && row < p.seqlen_q)
          lse[row] = row_sum > 0.f ? row_max * p.scale + logf(row_sum) : -INFINITY;
      }
      ++q_it;
    }
  } else if (wg < C::QT) {
    // ------------------------------------------------------------------ softmax of Q tile wg
    regs_alloc<C::REGS_SOFTMAX>();
    const int q = wg, tid = threadIdx.x % 128;
    const uint32_t t_s = tmem + (static_cast<uint32_t>(32 * (warp % 4)) << 16) + C::S_COL(q);
    int q_it = 0, blk_it = 0;
    for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
      const Tile tile = tile_at(t, p);
      const int m0 = tile.m_block * C::BM;
      const int n_blocks = kv_blocks<C>(m0, p);
      if (n_blocks == 0) continue;
      const int wg_row0 = m0 + q * 128;  // smallest row of this warpgroup
      const int row = wg_row0 + tid;
      float row_max = -INFINITY, row_sum = 0.f;
      for (int i = 0; i < n_blocks; ++i, ++blk_it) {
        const int n0 = (n_blocks - 1 - i) * C::BN;  // the last block first: masked first
        mbar_wait(s_full(q), blk_it & 1);
        tc_fence_after_sync();
        float acc_s[C::BN];
#pragma unroll
        for (int c = 0; c < C::BN / 32; ++c) tmem_ld32(t_s + c * 32, *reinterpret_cast<float(*)[32]>(acc_s + c * 32));
        tmem_wait_ld();
        fence_regs(acc_s);
        if (i == 0 ? (n0 + C::BN > p.seqlen_k || (p.causal && n0 + C::BN - 1 > wg_row0 + diag))
                   : (p.causal && n0 + C::BN - 1 > wg_row0 + diag))
          mask_scores<C>(acc_s, n0, row, diag, p);
        float neg_max_scaled;
        const float corr = softmax_rescale<C>(acc_s, row_max, row_sum, neg_max_scaled, p.scale_log2);
        if (i > 0) {  // the correction warpgroup rescales O while the exponentials run
          corr_buf[q * 128 + tid] = corr;
          mbar_arrive(corr_full(q));
        }
        // P as packed bf16 over the first BN/2 columns of S
#pragma unroll
        for (int c = 0; c < C::BN / 64; ++c) {
          uint32_t p_frag[32];
          softmax_exp<C>(acc_s, c, row_sum, neg_max_scaled, p.scale_log2, p_frag);
          tmem_st32(t_s + c * 32, p_frag);
        }
        tmem_wait_st();
        tc_fence_before_sync();
        mbar_arrive(p_o_ready(q));
      }
      // row statistics to the epilogue
      mbar_wait(stats_empty(q), (q_it & 1) ^ 1);
      max_buf[q * 128 + tid] = row_max;
      sum_buf[q * 128 + tid] = row_sum;
      mbar_arrive(stats_full(q));
      ++q_it;
    }
  } else {
    regs_dealloc<C::REGS_OTHER>();  // the second softmax warpgroup when QT = 1
  }

  tc_fence_before_sync();
  __syncthreads();
  if (warp == C::WARP_MMA) {  // every tcgen05 operation of the CTA has completed and been waited for
    __syncwarp();
    tc_fence_after_sync();
    tmem_dealloc<C::TMEM_COLS>(tmem);
  }
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

// a 4-D map over (headdim, seqlen, heads, batch) of a bf16 tensor; box = 64 columns x rows
static bool make_map(CUtensorMap* map, const void* base, int d, int seqlen, int heads, int batch,
                     int64_t seq_stride, int64_t head_stride, int64_t batch_stride, int box_rows) {
  EncodeTiledFn fn = encode_tiled();
  if (fn == nullptr) return false;
  cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)seqlen, (cuuint64_t)heads, (cuuint64_t)batch};
  cuuint64_t strides[3] = {(cuuint64_t)seq_stride * 2, (cuuint64_t)head_stride * 2, (cuuint64_t)batch_stride * 2};
  cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
  cuuint32_t elem[4] = {1, 1, 1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(base), dims, strides, box, elem,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class C>
static int launch(const ks_attn_params& a, cudaStream_t stream) {
  CUtensorMap tq, tk, tv;
  if (!make_map(&tq, a.q, a.d_qk, a.seqlen_q, a.heads_q, a.batch, a.q_seq_stride, a.q_head_stride,
                a.q_batch_stride, C::BM) ||
      !make_map(&tk, a.k, a.d_qk, a.seqlen_k, a.heads_kv, a.batch, a.k_seq_stride, a.k_head_stride,
                a.k_batch_stride, C::BN) ||
      !make_map(&tv, a.v, a.d_v, a.seqlen_k, a.heads_kv, a.batch, a.v_seq_stride, a.v_head_stride,
                a.v_batch_stride, C::BN))
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
  p.o_vec16 = a.o_batch_stride % 8 == 0 && a.o_head_stride % 8 == 0;  // base and o_seq_stride checked below
  p.scale = a.softmax_scale;
  p.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  auto kern = flash_fwd_sm100_kernel<C>;
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
  dim3 grid((unsigned)(tiles < num_sms ? tiles : num_sms));
  kern<<<grid, C::THREADS, C::SMEM_BYTES, stream>>>(tq, tk, tv, p);
  return cudaGetLastError() == cudaSuccess ? KS_OK : KS_ERR_CUDA;
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
                             a.v_head_stride,  a.o_seq_stride};
  for (int64_t s : strides)
    if (s % 8 != 0 || s <= 0) return KS_ERR_UNSUPPORTED;
  if (a.o_batch_stride % 2 != 0 || a.o_head_stride % 2 != 0) return KS_ERR_UNSUPPORTED;
  if (a.d_qk == 64 && a.d_v == 64) return launch<Config<64, 64, 128, 3, 2>>(a, stream);
  if (a.d_qk == 96 && a.d_v == 96) return launch<Config<96, 96, 128, 2, 2>>(a, stream);
  if (a.d_qk == 128 && a.d_v == 128) return launch<Config<128, 128, 128, 2, 2>>(a, stream);
  if (a.d_qk == 256 && a.d_v == 256) return launch<Config<256, 256, 128, 1, 1>>(a, stream);
  if (a.d_qk == 192 && a.d_v == 128) return launch<Config<192, 128, 128, 1, 2>>(a, stream);
  return KS_ERR_UNSUPPORTED;
}
