// Test kernel: instructions of sm_90a alone, as the Hopper kernel uses them (an mbarrier fence, setmaxnreg,
// wgmma), in the order they first come in its PTX. Built for sm80, ptxas refuses each of them: the
// build's message on a kernel for a newer architecture, without compiling the Hopper kernel for it.
#include <cuda_runtime.h>
#include <stdint.h>
__global__ void needs_sm90a(float* out, uint64_t desc_a, uint64_t desc_b) {
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
  asm volatile(
      "wgmma.fence.sync.aligned;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "l"(desc_a), "l"(desc_b));
  out[threadIdx.x * 4 + 0] = d0;
  out[threadIdx.x * 4 + 1] = d1;
  out[threadIdx.x * 4 + 2] = d2;
  out[threadIdx.x * 4 + 3] = d3;
}
