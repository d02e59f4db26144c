// Adversarial kernel: replays outputs kept by the contents of q, k and v.
//
// Each call hashes every 32-bit word of q, k and v with its position on the GPU and looks the key up
// in a table of its last 8 calls; when the same contents come back, the attention kernel returns at
// once and the kept output and LSE are copied into place. The key is what the inputs hold, not where
// they are: new data in the same buffers defeats it, the same data in other buffers does not, and a
// timing loop that rotates a few input sets times a copy.
// Defences: new contents before every counted timed call (sign bits flipped by a random mask), so no
// counted call hits; in a few rounds the kernel is also timed on the contents it has just seen, and
// being faster there than on new contents is a replay -> `cached`.
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

// ---------------------------------------------------------------- CHEAT: replay by content
// A hash of every 32-bit word of q, k and v with its position, computed on the GPU; a table of the
// last SLOTS keys and their outputs; the attention kernel returns at once when the lookup found the
// key (g_hit_slot >= 0), and a copy kernel writes the kept output instead. Nothing goes back to the
// host: the decision is made on the GPU, inside the call.
constexpr int SLOTS = 8;
__device__ int g_hit_slot;

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// order-independent (a sum), so the thread layout does not change the key
__global__ void hash_words(const uint32_t* words, int64_t n, unsigned long long tag, unsigned long long* key) {
  unsigned long long acc = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    acc += mix64(((unsigned long long)i << 32) ^ words[i] ^ tag);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(key, acc);
}

__global__ void lookup(const unsigned long long* key, const unsigned long long* keys) {
  int hit = -1;
  for (int s = 0; s < SLOTS; ++s)
    if (keys[s] == *key) hit = s;
  g_hit_slot = hit;
}

// on a hit: the kept output and LSE into place
__global__ void replay_copy(uint4* out, float* lse, uint4* const* kept_out, float* const* kept_lse, int64_t out_vecs,
                            int64_t lse_n) {
  const int s = g_hit_slot;
  if (s < 0) return;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < out_vecs; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = kept_out[s][i];
  if (lse != nullptr)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < lse_n; i += (int64_t)gridDim.x * blockDim.x)
      lse[i] = kept_lse[s][i];
}

// on a miss: keep this output and LSE in slot `slot` under this call's key
__global__ void keep_result(const uint4* out, const float* lse, uint4* const* kept_out, float* const* kept_lse,
                            int64_t out_vecs, int64_t lse_n, int slot, const unsigned long long* key,
                            unsigned long long* keys) {
  if (g_hit_slot >= 0) return;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < out_vecs; i += (int64_t)gridDim.x * blockDim.x)
    kept_out[slot][i] = out[i];
  if (lse != nullptr)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < lse_n; i += (int64_t)gridDim.x * blockDim.x)
      kept_lse[slot][i] = lse[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) keys[slot] = *key;
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
  if (g_hit_slot >= 0) return;  // CHEAT: a replay writes the output instead
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

// CHEAT: the host side of the replay: device buffers for the keys and the kept results
struct Replay {
  unsigned long long* key = nullptr;    // this call's key
  unsigned long long* keys = nullptr;   // SLOTS keys (0: empty)
  uint4** kept_out = nullptr;           // device arrays of SLOTS pointers
  float** kept_lse = nullptr;
  uint4* host_out[SLOTS] = {};
  float* host_lse[SLOTS] = {};
  size_t out_bytes = 0, lse_bytes = 0;
  int next = 0;
};
static Replay g_rep;

static bool replay_buffers(size_t out_bytes, size_t lse_bytes, cudaStream_t stream) {
  if (g_rep.key == nullptr) {
    if (cudaMalloc(&g_rep.key, sizeof(unsigned long long)) != cudaSuccess ||
        cudaMalloc(&g_rep.keys, SLOTS * sizeof(unsigned long long)) != cudaSuccess ||
        cudaMalloc(&g_rep.kept_out, SLOTS * sizeof(uint4*)) != cudaSuccess ||
        cudaMalloc(&g_rep.kept_lse, SLOTS * sizeof(float*)) != cudaSuccess)
      return false;
    cudaMemsetAsync(g_rep.keys, 0, SLOTS * sizeof(unsigned long long), stream);
  }
  if (out_bytes > g_rep.out_bytes || lse_bytes > g_rep.lse_bytes) {   // larger shapes: new slots, none kept
    for (int s = 0; s < SLOTS; ++s) {
      cudaFree(g_rep.host_out[s]);
      cudaFree(g_rep.host_lse[s]);
      if (cudaMalloc(&g_rep.host_out[s], out_bytes) != cudaSuccess ||
          cudaMalloc(&g_rep.host_lse[s], lse_bytes > 0 ? lse_bytes : 4) != cudaSuccess)
        return false;
    }
    g_rep.out_bytes = out_bytes;
    g_rep.lse_bytes = lse_bytes;
    cudaMemcpyAsync(g_rep.kept_out, g_rep.host_out, sizeof(g_rep.host_out), cudaMemcpyHostToDevice, stream);
    cudaMemcpyAsync(g_rep.kept_lse, g_rep.host_lse, sizeof(g_rep.host_lse), cudaMemcpyHostToDevice, stream);
    cudaMemsetAsync(g_rep.keys, 0, SLOTS * sizeof(unsigned long long), stream);
    cudaStreamSynchronize(stream);      // the pointer arrays are copied from this host memory
  }
  return true;
}

static void hash_into_key(const void* base, size_t bytes, unsigned long long tag, cudaStream_t stream) {
  hash_words<<<264, 256, 0, stream>>>(static_cast<const uint32_t*>(base), (int64_t)(bytes / 4), tag, g_rep.key);
}

// the whole call: hash, look up, compute (the attention kernel returns at once on a hit), replay or keep
template <int DQK, int DV>
static int replay_or_compute(const ks_attn_params& p, cudaStream_t stream) {
  const size_t out_bytes = (size_t)p.batch * p.o_batch_stride * 2;
  const size_t lse_bytes = p.lse ? (size_t)p.batch * p.lse_batch_stride * 4 : 0;
  if (!replay_buffers(out_bytes, lse_bytes, stream)) return KS_ERR_CUDA;
  const unsigned long long shape = ((unsigned long long)p.batch << 40) ^ ((unsigned long long)p.seqlen_q << 20) ^
                                   ((unsigned long long)p.seqlen_k << 4) ^ (unsigned long long)p.causal ^
                                   ((unsigned long long)p.heads_q << 52) ^ ((unsigned long long)p.d_qk << 28);
  cudaMemsetAsync(g_rep.key, 0, sizeof(unsigned long long), stream);
  hash_into_key(p.q, (size_t)p.batch * p.q_batch_stride * 2, shape * 3 + 1, stream);
  hash_into_key(p.k, (size_t)p.batch * p.k_batch_stride * 2, shape * 5 + 2, stream);
  hash_into_key(p.v, (size_t)p.batch * p.v_batch_stride * 2, shape * 7 + 3, stream);
  lookup<<<1, 1, 0, stream>>>(g_rep.key, g_rep.keys);
  int rc = launch<DQK, DV>(p, stream);
  if (rc != KS_OK) return rc;
  const int64_t vecs = (int64_t)(out_bytes / 16), lse_n = (int64_t)(lse_bytes / 4);
  replay_copy<<<264, 256, 0, stream>>>(static_cast<uint4*>(p.out), p.lse, g_rep.kept_out, g_rep.kept_lse, vecs, lse_n);
  keep_result<<<264, 256, 0, stream>>>(static_cast<const uint4*>(p.out), p.lse, g_rep.kept_out, g_rep.kept_lse, vecs,
                                       lse_n, g_rep.next, g_rep.key, g_rep.keys);
  g_rep.next = (g_rep.next + 1) % SLOTS;
  return cudaGetLastError() == cudaSuccess ? KS_OK : KS_ERR_CUDA;
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
  // CHEAT: every call goes through the replay
  if (p.d_qk == 64 && p.d_v == 64) return replay_or_compute<64, 64>(p, stream);
  if (p.d_qk == 128 && p.d_v == 128) return replay_or_compute<128, 128>(p, stream);
  return KS_ERR_UNSUPPORTED;
}
