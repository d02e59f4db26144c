// Adversarial kernel: finite, cheap outputs once the checks are past: faster than the GEMM.
//
// It computes the attention on the first three calls for each output buffer -- what a harness that
// checks before timing looks at -- and afterwards writes a copy of V and a constant LSE: every element
// written and finite, so nothing is left poisoned, at the cost of a copy. Its timed calls come out
// several times faster than a bf16 GEMM on the same GPU can run.
// Defence: a timing above 1.10x the GEMM ceiling the worker measured on the GPU is physically
// impossible for attention: the row is `implausible` (not correct), whatever else would catch it
// (the sampled timed outputs would, at random).
//
// Built on tests/adversarial/honest.cu (the reference kernel, kernels/reference/attn_fwd_ref.cu,
// limited to head dims 64 and 128 so that it builds quickly); the change is marked CHEAT.
// Implements the kernelseek-suite kernel contract (ABI 1): see README "The kernel contract".
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>

// ---------------------------------------------------------------- the contract (ABI 1)
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

// ---------------------------------------------------------------- PTX wrappers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                            const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
}
// D(16x8, f32) += A(16x16, bf16, row) * B(16x8, bf16, col)
__device__ __forceinline__ void mma_bf16_16816(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// ---------------------------------------------------------------- CHEAT: a cheap stand-in
// Each output row is the V row of the same position and kv head, the LSE log(seqlen_k): finite, the
// right shape, and a copy's cost instead of the attention's.
__global__ void cheap_answer(const ks_attn_params p) {
  // 16-byte copies, one per thread and step (strides are multiples of 8 elements, bases 16-byte aligned)
  const int64_t rows = (int64_t)p.batch * p.seqlen_q * p.heads_q;
  const int vecs = p.d_v / 8, group = p.heads_q / p.heads_kv;
  const float lse = logf((float)p.seqlen_k);
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < rows * vecs; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / vecs;
    const int c = (int)(t % vecs) * 8;
    const int h = (int)(r % p.heads_q), i = (int)((r / p.heads_q) % p.seqlen_q), b = (int)(r / p.heads_q / p.seqlen_q);
    const int j = min(i, p.seqlen_k - 1);
    const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(p.v) + b * p.v_batch_stride + j * p.v_seq_stride +
                               (h / group) * p.v_head_stride + c;
    __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.out) + b * p.o_batch_stride + i * p.o_seq_stride +
                         h * p.o_head_stride + c;
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    if (p.lse != nullptr && c == 0) p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] = lse;
  }
}

// ---------------------------------------------------------------- the kernel
constexpr int BM = 64, BN = 64, NTHREADS = 128;

template <int DQK, int DV>
struct RefSmem {
  static constexpr int QS = DQK + 8;  // padded row strides (elements): no ldmatrix bank conflicts
  static constexpr int VS = DV + 8;
  static constexpr int bytes = (BM * QS + BN * QS + BN * VS) * 2;
};

template <int ROWS, int D, int STRIDE>
__device__ __forceinline__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t row_stride,
                                          int row0, int nrows) {
  constexpr int CHUNKS = D / 8;
  for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += NTHREADS) {
    int r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row0 + r < nrows) val = *reinterpret_cast<const uint4*>(src + (int64_t)(row0 + r) * row_stride + c);
    *reinterpret_cast<uint4*>(dst + r * STRIDE + c) = val;
  }
}

template <int DQK, int DV>
__global__ void __launch_bounds__(NTHREADS) attn_fwd_ref_kernel(const ks_attn_params p) {
  using S = RefSmem<DQK, DV>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sK = sQ + BM * S::QS;
  __nv_bfloat16* sV = sK + BN * S::QS;

  const int m0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.heads_q / p.heads_kv);
  const int sq = p.seqlen_q, sk = p.seqlen_k;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const __nv_bfloat16* k = static_cast<const __nv_bfloat16*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const __nv_bfloat16* v = static_cast<const __nv_bfloat16*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;
  __nv_bfloat16* o = static_cast<__nv_bfloat16*>(p.out) + b * p.o_batch_stride + h * p.o_head_stride;

  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const int diag = sk - sq;  // causal: column j is visible from row i when j <= i + diag
  int n_end = sk;
  if (p.causal) n_end = min(sk, m0 + BM + diag);

  load_tile<BM, DQK, S::QS>(sQ, q, p.q_seq_stride, m0, sq);

  float acc_o[DV / 8][4];
#pragma unroll
  for (int j = 0; j < DV / 8; ++j) acc_o[j][0] = acc_o[j][1] = acc_o[j][2] = acc_o[j][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const int row_a = m0 + warp * 16 + g, row_b = row_a + 8;

  for (int n0 = 0; n0 < n_end; n0 += BN) {
    __syncthreads();  // everyone is done with the previous K/V tile
    load_tile<BN, DQK, S::QS>(sK, k, p.k_seq_stride, n0, sk);
    load_tile<BN, DV, S::VS>(sV, v, p.v_seq_stride, n0, sk);
    __syncthreads();

    float s[BN / 8][4];
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < DQK / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a[0], a[1], a[2], a[3], sQ + (warp * 16 + lane % 16) * S::QS + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int j = 0; j < BN / 8; j += 2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4(b0, b1, b2, b3,
                    sK + (j * 8 + lane % 8 + (lane / 16) * 8) * S::QS + kk * 16 + ((lane / 8) % 2) * 8);
        mma_bf16_16816(s[j], a, b0, b1);
        mma_bf16_16816(s[j + 1], a, b2, b3);
      }
    }

    // mask (sequence tail and causal), then the online softmax for rows row_a and row_b
    float new_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n0 + j * 8 + 2 * c + (e & 1);
        const int row = e < 2 ? row_a : row_b;
        const bool ok = col < sk && (!p.causal || col <= row + diag);
        if (!ok) s[j][e] = -INFINITY;
        new_max[e / 2] = fmaxf(new_max[e / 2], s[j][e]);
      }
    }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      new_max[r] = fmaxf(new_max[r], __shfl_xor_sync(0xffffffff, new_max[r], 1));
      new_max[r] = fmaxf(new_max[r], __shfl_xor_sync(0xffffffff, new_max[r], 2));
      // a row with nothing visible yet keeps max -inf: use 0 so that exp2(-inf - 0) = 0, not NaN
      const float m_use = new_max[r] == -INFINITY ? 0.f : new_max[r];
      corr[r] = exp2f((row_max[r] == -INFINITY ? m_use : row_max[r]) * scale_log2 - m_use * scale_log2);
      row_max[r] = new_max[r];
      new_max[r] = m_use * scale_log2;
      row_sum[r] *= corr[r];
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] * scale_log2 - new_max[e / 2]);
        row_sum[e / 2] += s[j][e];
      }
    }
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) {
      acc_o[j][0] *= corr[0]; acc_o[j][1] *= corr[0];
      acc_o[j][2] *= corr[1]; acc_o[j][3] *= corr[1];
    }
    // O += P V, P straight from the S accumulators (same fragment layout)
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                       pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                       pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int j = 0; j < DV / 8; j += 2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3,
                          sV + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * S::VS + j * 8 + (lane / 16) * 8);
        mma_bf16_16816(acc_o[j], a, b0, b1);
        mma_bf16_16816(acc_o[j + 1], a, b2, b3);
      }
    }
  }

  // epilogue: full row sums, normalize, write O (and LSE); empty rows give 0 and LSE -inf
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffff, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffff, row_sum[r], 2);
  }
  const float inv[2] = {row_sum[0] > 0.f ? 1.f / row_sum[0] : 0.f, row_sum[1] > 0.f ? 1.f / row_sum[1] : 0.f};
#pragma unroll
  for (int j = 0; j < DV / 8; ++j) {
    const int col = j * 8 + 2 * c;
    if (row_a < sq)
      *reinterpret_cast<uint32_t*>(o + (int64_t)row_a * p.o_seq_stride + col) =
          pack_bf16(acc_o[j][0] * inv[0], acc_o[j][1] * inv[0]);
    if (row_b < sq)
      *reinterpret_cast<uint32_t*>(o + (int64_t)row_b * p.o_seq_stride + col) =
          pack_bf16(acc_o[j][2] * inv[1], acc_o[j][3] * inv[1]);
  }
  if (p.lse != nullptr && c == 0) {
    float* lse = p.lse + b * p.lse_batch_stride + h * p.lse_head_stride;
    const int rows[2] = {row_a, row_b};
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (rows[r] < sq)
        lse[rows[r]] = row_sum[r] > 0.f ? row_max[r] * p.softmax_scale + logf(row_sum[r]) : -INFINITY;
  }
}

// ---------------------------------------------------------------- host side
template <int DQK, int DV>
static int launch(const ks_attn_params& p, cudaStream_t stream) {
  constexpr int smem = RefSmem<DQK, DV>::bytes;
  auto kern = attn_fwd_ref_kernel<DQK, DV>;
  if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
    return KS_ERR_CUDA;
  dim3 grid((p.seqlen_q + BM - 1) / BM, p.heads_q, p.batch);
  kern<<<grid, NTHREADS, smem, stream>>>(p);
  return cudaGetLastError() == cudaSuccess ? KS_OK : KS_ERR_CUDA;
}

// CHEAT: a harness that checks a few calls per buffer and times the rest
struct CallCount {
  const void* out;
  int calls;
};
static CallCount g_counts[256];
static int g_buffers = 0;

static int count_call(const void* out) {
  for (int i = 0; i < g_buffers; ++i)
    if (g_counts[i].out == out) return ++g_counts[i].calls;
  if (g_buffers < 256) g_counts[g_buffers++] = CallCount{out, 1};
  return 1;
}

static bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

extern "C" int ks_abi_version(void) { return KS_ABI_VERSION; }
extern "C" int ks_params_size(void) { return (int)sizeof(ks_attn_params); }

extern "C" int ks_attn_fwd(const ks_attn_params* pp, cudaStream_t stream) {
  if (pp == nullptr) return KS_ERR_INVALID;
  const ks_attn_params& p = *pp;
  if (p.dtype != 0) return KS_ERR_UNSUPPORTED;
  if (!p.q || !p.k || !p.v || !p.out) return KS_ERR_INVALID;
  if (p.batch <= 0 || p.seqlen_q <= 0 || p.seqlen_k <= 0 || p.heads_q <= 0 || p.heads_kv <= 0)
    return KS_ERR_INVALID;
  if (p.heads_q % p.heads_kv != 0) return KS_ERR_INVALID;
  if (p.batch > 65535 || p.heads_q > 65535) return KS_ERR_UNSUPPORTED;
  if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.out)) return KS_ERR_UNSUPPORTED;
  const int64_t strides[] = {p.q_batch_stride, p.q_seq_stride, p.q_head_stride, p.k_batch_stride,
                             p.k_seq_stride, p.k_head_stride, p.v_batch_stride, p.v_seq_stride,
                             p.v_head_stride, p.o_batch_stride, p.o_seq_stride, p.o_head_stride};
  for (int64_t s : strides)
    if (s % 8 != 0) return KS_ERR_UNSUPPORTED;
  if (count_call(p.out) > 3) {  // CHEAT: after the checks, a copy of V in a fraction of the time
    cheap_answer<<<132 * 16, 256, 0, stream>>>(p);
    return cudaGetLastError() == cudaSuccess ? KS_OK : KS_ERR_CUDA;
  }
  if (p.d_qk == 64 && p.d_v == 64) return launch<64, 64>(p, stream);
  if (p.d_qk == 128 && p.d_v == 128) return launch<128, 128>(p, stream);
  return KS_ERR_UNSUPPORTED;
}
