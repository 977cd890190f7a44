/* peak: this machine's limits, measured, so kernel figures can be quoted as
 * a fraction of them.
 *   FMA peak  independent FMA chains on the widest vectors the CPU has (enough
 *             chains to cover latency x ports), GFLOP/s on one core and on N.
 *   bandwidth STREAM-like copy and triad over arrays far larger than L3, GB/s
 *             counting the bytes the kernel reads and writes (not write-allocate).
 * Times are per-thread CPU time (see now()), so preemption is not counted.
 * Usage: peak [--threads N] [--json] */
#include "base/cpu.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Each thread times itself in its own CPU time: on a shared, loaded machine
 * wall time would count the time other processes held the core. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 12 chains x 8 lanes: covers 2 ports x 5-cycle latency. Returns flops. */
__attribute__((target("avx2,fma"))) static double fma_avx2(long iters) {
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++)
            a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    __m256 s = a[0];
    for (int i = 1; i < 12; i++)
        s = _mm256_add_ps(s, a[i]);
    float out[8];
    _mm256_storeu_ps(out, s);
    if (out[0] == 12345.0f)
        puts("");
    return (double)iters * 12 * 8 * 2;
}

/* 24 chains x 16 lanes. */
__attribute__((target("avx512f"))) static double fma_avx512(long iters) {
    __m512 a[24], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 24; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++)
            a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    __m512 s = a[0];
    for (int i = 1; i < 24; i++)
        s = _mm512_add_ps(s, a[i]);
    float out[16];
    _mm512_storeu_ps(out, s);
    if (out[0] == 12345.0f)
        puts("");
    return (double)iters * 24 * 16 * 2;
}

/* Scalar tier: 8 chains of scalar multiply-add (the compiler may not fuse). */
static double fma_scalar(long iters) {
    float a[8];
    for (int i = 0; i < 8; i++)
        a[i] = (float)i;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 8; i++)
            a[i] = a[i] * 0.999999f + 1e-7f;
    volatile float sink = a[0] + a[7];
    (void)sink;
    return (double)iters * 8 * 2;
}

static nnf_isa g_isa;

static double run_fma(long iters) {
    switch (g_isa) {
    case NNF_ISA_AVX512: return fma_avx512(iters);
    case NNF_ISA_AVX2: return fma_avx2(iters);
    default: return fma_scalar(iters);
    }
}

typedef struct th_arg {
    long iters;
    double flops, secs;
    pthread_barrier_t *bar;
} th_arg;

static void *fma_thread(void *p) {
    th_arg *a = p;
    pthread_barrier_wait(a->bar);
    double t0 = now();
    a->flops = run_fma(a->iters);
    a->secs = now() - t0;
    return NULL;
}

/* Best of 5 runs of about 0.2 s each, GFLOP/s summed over threads. */
static double fma_peak(int threads) {
    long iters = 1000;
    double t0 = now();
    run_fma(iters);
    while (now() - t0 < 0.05) {
        iters *= 2;
        t0 = now();
        run_fma(iters);
    }
    iters = (long)((double)iters * 0.2 / (now() - t0)) + 1;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t tid[256];
        th_arg args[256];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)threads);
        for (int t = 0; t < threads; t++) {
            args[t] = (th_arg){.iters = iters, .bar = &bar};
            if (t)
                pthread_create(&tid[t], NULL, fma_thread, &args[t]);
        }
        fma_thread(&args[0]);
        double g = 0, slowest = 0;
        for (int t = 0; t < threads; t++) {
            if (t)
                pthread_join(tid[t], NULL);
            g += args[t].flops;
            if (args[t].secs > slowest)
                slowest = args[t].secs;
        }
        pthread_barrier_destroy(&bar);
        g = g / slowest * 1e-9;
        if (g > best)
            best = g;
    }
    return best;
}

typedef struct bw_arg {
    float *a, *b, *c;
    size_t n;
    int triad;
    pthread_barrier_t *bar;
    double secs;
} bw_arg;

static void *bw_thread(void *p) {
    bw_arg *a = p;
    pthread_barrier_wait(a->bar);
    double t0 = now();
    if (a->triad) {
        for (size_t i = 0; i < a->n; i++)
            a->a[i] = a->b[i] + 3.0f * a->c[i];
    } else {
        memcpy(a->a, a->b, a->n * sizeof(float));
    }
    a->secs = now() - t0;
    return NULL;
}

/* GB/s of copy (2 streams) or triad (3 streams), best of 5. */
static double bandwidth(int threads, int triad, size_t n_total) {
    float *a = aligned_alloc(64, n_total * sizeof(float)), *b = aligned_alloc(64, n_total * sizeof(float));
    float *c = aligned_alloc(64, n_total * sizeof(float));
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return 0;
    }
    for (size_t i = 0; i < n_total; i++) {
        a[i] = 0.0f;
        b[i] = 1.0f;
        c[i] = 2.0f;
    }
    size_t per = n_total / (size_t)threads;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t tid[256];
        bw_arg args[256];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)threads);
        for (int t = 0; t < threads; t++) {
            args[t] = (bw_arg){.a = a + t * per, .b = b + t * per, .c = c + t * per, .n = per,
                               .triad = triad, .bar = &bar};
            if (t)
                pthread_create(&tid[t], NULL, bw_thread, &args[t]);
        }
        bw_thread(&args[0]);
        double slowest = args[0].secs;
        for (int t = 1; t < threads; t++) {
            pthread_join(tid[t], NULL);
            if (args[t].secs > slowest)
                slowest = args[t].secs;
        }
        pthread_barrier_destroy(&bar);
        double bytes = (double)per * (double)threads * sizeof(float) * (triad ? 3 : 2);
        double gbs = bytes / slowest * 1e-9;
        if (gbs > best)
            best = gbs;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv) {
    int json = 0, threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: peak [--threads N] [--json]\n");
            return 2;
        }
    }
    if (threads < 1)
        threads = 1;
    if (threads > 256)
        threads = 256;
    const nnf_cpu *cpu = nnf_cpu_get();
    g_isa = nnf_cpu_isa();
    /* the emulation build (NNF_EMULATE_AVX512) reports the AVX-512 tier on
     * AVX2 machines: their peak is the AVX2 FMAs' */
    if (g_isa == NNF_ISA_AVX512 && !(cpu->avx512f && cpu->os_zmm))
        g_isa = NNF_ISA_AVX2;
    double f1 = fma_peak(1), fn = threads > 1 ? fma_peak(threads) : f1;
    /* 3 arrays of 64 MiB: far beyond any L3 here */
    size_t n = (size_t)16 << 20;
    double copy1 = bandwidth(1, 0, n), triad1 = bandwidth(1, 1, n);
    double copyn = threads > 1 ? bandwidth(threads, 0, n) : copy1;
    double triadn = threads > 1 ? bandwidth(threads, 1, n) : triad1;
    if (json) {
        printf("{\"cpu\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"fma_gflops_1\": %.2f, "
               "\"fma_gflops_n\": %.2f, \"copy_gbs_1\": %.2f, \"triad_gbs_1\": %.2f, "
               "\"copy_gbs_n\": %.2f, \"triad_gbs_n\": %.2f}\n",
               cpu->brand, nnf_isa_name(g_isa), threads, f1, fn, copy1, triad1, copyn, triadn);
    } else {
        printf("cpu            %s (%s tier)\n", cpu->brand, nnf_isa_name(g_isa));
        printf("FMA peak       %8.1f GFLOP/s  1 thread\n", f1);
        printf("               %8.1f GFLOP/s  %d threads\n", fn, threads);
        printf("copy           %8.1f GB/s     1 thread, %8.1f GB/s %d threads\n", copy1, copyn, threads);
        printf("triad          %8.1f GB/s     1 thread, %8.1f GB/s %d threads\n", triad1, triadn, threads);
    }
    return 0;
}
