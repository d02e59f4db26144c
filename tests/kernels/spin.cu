// Test kernel: implements the contract and never finishes. It waits for a value the harness never
// writes (the output is poisoned with NaN before every launch), reading through volatile so the
// compiler keeps the loop. The sweep must time it out, kill the worker and go on.
#include <cuda_runtime.h>
#include <stdint.h>

#define KS_ABI_VERSION 1
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

__global__ void wait_forever(const volatile uint32_t* flag) {
  while (flag[0] != 0x12345678u) {
  }
}

extern "C" int ks_abi_version(void) { return KS_ABI_VERSION; }
extern "C" int ks_params_size(void) { return (int)sizeof(ks_attn_params); }
extern "C" int ks_attn_fwd(const ks_attn_params* p, cudaStream_t stream) {
  wait_forever<<<1, 1, 0, stream>>>(static_cast<const volatile uint32_t*>(p->out));
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
