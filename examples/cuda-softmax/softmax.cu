/* Y[r, :] = softmax(X[r, :]) for each of R rows of length C, float32, on the GPU.
 *
 * One block of 256 threads per row. Each thread strides over the row, so any C
 * works (C = 1, C not a multiple of 256, C far larger than the block). Two
 * shared-memory tree reductions per row: the maximum (NaN anywhere poisons the
 * row, like the reference), then the sum of exp(x - max) in double. Rows beyond
 * the 65535 limit of gridDim.y are covered by a grid-stride loop over gridDim.x.
 *
 * The entry is the launcher: device pointers in, launch on the default stream.
 */
#include <math.h>
#include <stdint.h>

#define THREADS 256

__global__ void softmax_rows_kernel(const float *X, float *Y, int64_t R, int64_t C) {
    __shared__ float smax[THREADS];
    __shared__ double ssum[THREADS];
    __shared__ int snan[THREADS];
    const int t = threadIdx.x;
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const float *x = X + r * C;
        float *y = Y + r * C;
        float m = -INFINITY;
        int nan = 0;
        for (int64_t c = t; c < C; c += THREADS) {
            const float v = x[c];
            nan |= isnan(v);
            m = v > m ? v : m;
        }
        smax[t] = m;
        snan[t] = nan;
        __syncthreads();
        for (int s = THREADS / 2; s > 0; s >>= 1) {
            if (t < s) {
                smax[t] = smax[t + s] > smax[t] ? smax[t + s] : smax[t];
                snan[t] |= snan[t + s];
            }
            __syncthreads();
        }
        const float rowmax = snan[0] ? NAN : smax[0];
        double sum = 0.0;
        for (int64_t c = t; c < C; c += THREADS) {
            const float e = expf(x[c] - rowmax);
            y[c] = e;
            sum += e;
        }
        ssum[t] = sum;
        __syncthreads();
        for (int s = THREADS / 2; s > 0; s >>= 1) {
            if (t < s) ssum[t] += ssum[t + s];
            __syncthreads();
        }
        const float inv = (float)(1.0 / ssum[0]);
        for (int64_t c = t; c < C; c += THREADS) y[c] *= inv;
        __syncthreads(); /* the shared arrays are reused by the next row */
    }
}

extern "C" void softmax_rows_cuda(const float *X, float *Y, int64_t R, int64_t C) {
    if (R <= 0 || C <= 0) return; /* nothing to do; a zero-sized grid is a launch error */
    const int64_t blocks = R < 65535 ? R : 65535;
    softmax_rows_kernel<<<(unsigned)blocks, THREADS>>>(X, Y, R, C);
}
