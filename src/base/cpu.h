/* CPU features, detected once (CPUID + XGETBV) and shared by every kernel
 * family's dispatch table.
 *
 * The tier in force is max_isa, the best the CPU and the OS support (on AMD
 * Zen 4 too, which executes each 512-bit operation as two 256-bit halves:
 * zmm_halves says so, for kernels whose best form differs there).
 * NNF_ISA=scalar|avx2|avx512 sets it to any tier up to max_isa (read once;
 * asking for more than the machine has logs a warning and keeps max_isa).
 * Tests switch tiers with
 * nnf_cpu_force_isa so that every tier the machine has is exercised in one
 * process. A kernel plan records the tier it was built for, so switching the
 * tier never changes a plan that already exists. */
#ifndef NNF_BASE_CPU_H
#define NNF_BASE_CPU_H

#include <stdbool.h>
#include <stddef.h>

typedef enum nnf_isa {
    NNF_ISA_SCALAR = 0, /* portable C, any x86-64 */
    NNF_ISA_AVX2 = 1,   /* AVX2 + FMA3 (Haswell, Zen) */
    NNF_ISA_AVX512 = 2, /* AVX-512 F/BW/DQ/VL (Skylake-X, Zen 4) */
} nnf_isa;

typedef struct nnf_cpu {
    char vendor[13];
    char brand[49];
    bool avx, avx2, fma, f16c, avx512f, avx512bw, avx512dq, avx512vl;
    bool os_ymm, os_zmm; /* XCR0 says the OS saves YMM / ZMM state */
    unsigned family;        /* CPUID display family (0x19: AMD Zen 3 and 4) */
    unsigned model;         /* CPUID display model (with the extended bits) */
    bool zmm_halves;        /* 512-bit operations run as two 256-bit halves */
    bool ymm_halves;        /* 256-bit operations run as two 128-bit halves (Zen 1) */
    /* Each broadcast load costs FMA throughput (Intel cores): a register
     * tile with a broadcast every 2 FMAs ran at 82-86 % of the FMA peak
     * with every operand in L1, one every 3-4 at 87-91 % (an Intel Xeon,
     * family 6 model 0xA7, docs/KERNELS.md forty-second round); on Zen 5
     * the 2-zmm tile measured ahead. Kernels whose tile width is a choice
     * take the wider tile here. */
    bool bcast_costly;
    /* AMX tiles with BF16 products (Sapphire Rapids on): the CPU has them,
     * the OS saves their state and let this process use them (Linux
     * arch_prctl), and NNF_AMX is not 0. The AVX-512 tier's f32 GEMM then
     * runs on them as bf16x6 (kernels/gemm.h, docs/KERNELS.md): an f32-level
     * error, not the f32 FMAs' rounding bit for bit. */
    bool amx, amx_hw;       /* in use; present and permitted */
    nnf_isa max_isa;        /* best tier the CPU and OS support: the default */
    /* Cache sizes in bytes: l1d and l2 per core, l3 per package (shared); never 0 (32 KiB,
     * 256 KiB and 8 MiB where CPUID reports nothing). */
    size_t l1d, l2, l3;
} nnf_cpu;

/* The machine's features; detected on the first call, thread-safe. */
const nnf_cpu *nnf_cpu_get(void);
/* The tier kernels should use now (NNF_ISA or nnf_cpu_force_isa applied). */
nnf_isa nnf_cpu_isa(void);
/* Force a tier (tests, tools); it is clamped to max_isa. Returns the tier now
 * in force. */
nnf_isa nnf_cpu_force_isa(nnf_isa isa);
/* Tests: set bcast_costly, so that the tile forms that follow it run both
 * ways on any machine (only plans made after the call see it). Returns the
 * previous value. */
bool nnf_cpu_force_bcast_costly(bool on);
/* Tests: set ymm_halves (plans made after the call see it); returns the
 * previous value. */
bool nnf_cpu_force_ymm_halves(bool on);
/* Tests: turn the AMX GEMM on or off for the calls that follow (on only
 * where the CPU has it, or in the AVX-512 emulation build, whose AMX tiles
 * are C loops). Returns the previous value. */
bool nnf_cpu_force_amx(bool on);
const char *nnf_isa_name(nnf_isa isa);
/* "scalar", "avx2", "avx512" (case-insensitive); false if unknown. */
bool nnf_isa_parse(const char *s, nnf_isa *out);

#endif
