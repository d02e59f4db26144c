// Test kernel: a syntax error, so the build must fail with nvcc's own message.
#include <cuda_runtime.h>
__global__ void broken(float* x) { x[threadIdx.x] = undeclared_name * 2.0f; }
