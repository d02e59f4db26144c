/* Single-head attention forward on the CPU, float32, row-major:
 *   o[i,:] = sum_j softmax_j(scale * q[i,:] . k[j,:]) * v[j,:]
 * q, k, v, o are n x d. With causal != 0, row i attends to columns j <= i only.
 * A plain, correct starting point. */
#include <math.h>
#include <stdlib.h>

void ks_attn_fwd_cpu(const float *q, const float *k, const float *v, float *o,
                     int n, int d, int causal, float scale)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) {
        int last = causal ? i : n - 1;
        float mx = -INFINITY;
        for (int j = 0; j <= last; j++) {
            float s = 0.0f;
            for (int c = 0; c < d; c++)
                s += q[i * d + c] * k[j * d + c];
            p[j] = s * scale;
            if (p[j] > mx)
                mx = p[j];
        }
        float sum = 0.0f;
        for (int j = 0; j <= last; j++) {
            p[j] = expf(p[j] - mx);
            sum += p[j];
        }
        for (int c = 0; c < d; c++) {
            float acc = 0.0f;
            for (int j = 0; j <= last; j++)
                acc += p[j] * v[j * d + c];
            o[i * d + c] = acc / sum;
        }
    }
    free(p);
}
