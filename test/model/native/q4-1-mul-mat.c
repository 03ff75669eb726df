// Multiplies Q4_1 weights by batches of every size through the tuned build's ggml (test/model/engine-build.test.ts).
// Prints "nrows N" (the CPU type traits' rows per dot product), then, per case, the number of result values that
// differ bit for bit from the same column multiplied alone, and the largest error against a double-precision
// product of the dequantized weights, relative to the sum of the products' magnitudes. Exits 1 on a broken case.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "ggml.h"

static float * mul_mat(const void * q, int k, int rows, const float * x, int cols, int threads) {
    struct ggml_init_params params = { 256u * 1024 * 1024, NULL, false };
    struct ggml_context * ctx = ggml_init(params);
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_1, k, rows);
    memcpy(w->data, q, ggml_nbytes(w));
    struct ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, cols);
    memcpy(a->data, x, sizeof(float) * (size_t) k * cols);
    struct ggml_tensor * y = ggml_mul_mat(ctx, w, a);
    struct ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, y);
    if (ggml_graph_compute_with_ctx(ctx, graph, threads) != GGML_STATUS_SUCCESS) exit(2);
    float * out = malloc(sizeof(float) * (size_t) rows * cols);
    memcpy(out, y->data, sizeof(float) * (size_t) rows * cols);
    ggml_free(ctx);
    return out;
}

static int check(int k, int rows, int cols, int threads) {
    float * wf = malloc(sizeof(float) * (size_t) k * rows);
    float * x = malloc(sizeof(float) * (size_t) k * cols);
    for (size_t i = 0; i < (size_t) k * rows; i++) wf[i] = (float) rand() / RAND_MAX - 0.3f;
    for (size_t i = 0; i < (size_t) k * cols; i++) x[i] = 2.0f * rand() / RAND_MAX - 1.0f;
    void * q = malloc(ggml_row_size(GGML_TYPE_Q4_1, k) * rows);
    ggml_quantize_chunk(GGML_TYPE_Q4_1, wf, q, 0, rows, k, NULL);
    float * deq = malloc(sizeof(float) * (size_t) k * rows);
    ggml_get_type_traits(GGML_TYPE_Q4_1)->to_float(q, deq, (int64_t) k * rows);

    float * batch = mul_mat(q, k, rows, x, cols, threads);
    int differing = 0;
    double worst = 0;
    for (int c = 0; c < cols; c++) {
        float * alone = mul_mat(q, k, rows, x + (size_t) c * k, 1, threads);
        for (int r = 0; r < rows; r++) {
            const float got = batch[(size_t) c * rows + r];
            if (memcmp(&got, &alone[r], sizeof got) != 0) differing++;
            double exact = 0, scale = 1e-6;
            for (int i = 0; i < k; i++) {
                const double p = (double) deq[(size_t) r * k + i] * x[(size_t) c * k + i];
                exact += p;
                scale += fabs(p);
            }
            const double error = fabs(got - exact) / scale;
            if (error > worst) worst = error;
        }
        free(alone);
    }
    printf("k %d rows %d cols %d threads %d: differing %d, worst relative error %.2e\n", k, rows, cols, threads,
           differing, worst);
    free(batch), free(deq), free(q), free(x), free(wf);
    return differing == 0 && worst < 0.02;
}

int main(void) {
    srand(7);
    printf("nrows %lld\n", (long long) ggml_get_type_traits_cpu(GGML_TYPE_Q4_1)->nrows);
    // SmolLM2's widths; a batch of one, pairs, lone columns, more than a 16-column block, and an odd row count.
    static const int cases[][3] = { { 576, 192, 1 }, { 576, 192, 2 }, { 576, 576, 3 },  { 576, 1536, 7 },
                                    { 1536, 576, 16 }, { 576, 192, 19 }, { 576, 97, 5 }, { 64, 34, 33 } };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int threads = 1; threads <= 2; threads++) ok &= check(cases[i][0], cases[i][1], cases[i][2], threads);
    }
    return ok ? 0 : 1;
}
