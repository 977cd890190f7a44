/* CPUID-based feature and cache detection. */
#include "base/cpu.h"

#include "base/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define NNF_X86 1
#endif

static nnf_cpu g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_isa;

#ifdef NNF_X86
static void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

/* XGETBV is encoded by hand so this file needs no -mxsave. */
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Leaf 4 (Intel) and 0x8000001D (AMD) share one layout: walk the subleaves
 * until the type field says "no more caches". */
static void read_caches(uint32_t leaf) {
    for (uint32_t i = 0; i < 16; i++) {
        uint32_t r[4];
        cpuid(leaf, i, r);
        uint32_t type = r[0] & 0x1f;
        if (type == 0)
            break;
        uint32_t level = (r[0] >> 5) & 7;
        size_t ways = ((r[1] >> 22) & 0x3ff) + 1;
        size_t parts = ((r[1] >> 12) & 0x3ff) + 1;
        size_t line = (r[1] & 0xfff) + 1;
        size_t sets = (size_t)r[2] + 1;
        size_t size = ways * parts * line * sets;
        if (level == 1 && (type == 1 || type == 3))
            g_cpu.l1d = size;
        else if (level == 2)
            g_cpu.l2 = size;
        else if (level == 3)
            g_cpu.l3 = size;
    }
}

static void detect_x86(void) {
    uint32_t r[4];
    cpuid(0, 0, r);
    uint32_t max_leaf = r[0];
    memcpy(g_cpu.vendor + 0, &r[1], 4);
    memcpy(g_cpu.vendor + 4, &r[3], 4);
    memcpy(g_cpu.vendor + 8, &r[2], 4);
    g_cpu.vendor[12] = 0;

    cpuid(1, 0, r);
    unsigned base_family = (r[0] >> 8) & 0xf;
    g_cpu.family = base_family == 0xf ? base_family + ((r[0] >> 20) & 0xff) : base_family;
    g_cpu.model = ((r[0] >> 4) & 0xf) |
                  (base_family == 0x6 || base_family == 0xf ? ((r[0] >> 16) & 0xf) << 4 : 0);
    bool osxsave = (r[2] >> 27) & 1;
    g_cpu.avx = (r[2] >> 28) & 1;
    g_cpu.fma = (r[2] >> 12) & 1;
    g_cpu.f16c = (r[2] >> 29) & 1;
    if (osxsave) {
        uint64_t xcr0 = xgetbv0();
        g_cpu.os_ymm = (xcr0 & 0x6) == 0x6;          /* XMM + YMM */
        g_cpu.os_zmm = (xcr0 & 0xe6) == 0xe6;        /* + opmask, ZMM_Hi256, Hi16_ZMM */
    }
    if (max_leaf >= 7) {
        cpuid(7, 0, r);
        g_cpu.avx2 = (r[1] >> 5) & 1;
        g_cpu.avx512f = (r[1] >> 16) & 1;
        g_cpu.avx512dq = (r[1] >> 17) & 1;
        g_cpu.avx512bw = (r[1] >> 30) & 1;
        g_cpu.avx512vl = (r[1] >> 31) & 1;
        /* AMX-BF16 (EDX 22) and AMX-TILE (24), their state saved by the
         * OS (XCR0 bits 17, 18: TILECFG, TILEDATA) */
        g_cpu.amx_hw =
            ((r[3] >> 22) & 1) && ((r[3] >> 24) & 1) && osxsave && ((xgetbv0() >> 17) & 3) == 3;
    }
    cpuid(0x80000000u, 0, r);
    uint32_t max_ext = r[0];
    if (max_ext >= 0x80000004u) {
        for (uint32_t i = 0; i < 3; i++) {
            cpuid(0x80000002u + i, 0, r);
            memcpy(g_cpu.brand + 16 * i, r, 16);
        }
        g_cpu.brand[48] = 0;
    }
    bool amd = !strcmp(g_cpu.vendor, "AuthenticAMD") || !strcmp(g_cpu.vendor, "HygonGenuine");
    if (amd && max_ext >= 0x8000001Du) {
        cpuid(0x80000001u, 0, r);
        if ((r[2] >> 22) & 1) /* TOPOEXT: leaf 0x8000001D is valid */
            read_caches(0x8000001Du);
    } else if (max_leaf >= 4) {
        read_caches(4);
    }

    if (g_cpu.avx && g_cpu.avx2 && g_cpu.fma && g_cpu.os_ymm)
        g_cpu.max_isa = NNF_ISA_AVX2;
    if (g_cpu.max_isa == NNF_ISA_AVX2 && g_cpu.avx512f && g_cpu.avx512bw && g_cpu.avx512dq &&
        g_cpu.avx512vl && g_cpu.os_zmm)
        g_cpu.max_isa = NNF_ISA_AVX512;
    /* Zen 4 (family 19h; Zen 3 shares the family but has no AVX-512) has two
     * 256-bit FMA pipes and splits every 512-bit operation across them: the
     * same FLOPs per cycle as AVX2. The eighth round measured the AVX2
     * kernels faster there and made AVX2 its default; the AVX-512 tier has
     * since gained forms AVX2 lacks (the GEMM reading A in place, 24-channel
     * conv tiles, stride-2 and F(2x2) Winograd, two-block depthwise) and in
     * the thirty-third round ran ResNet-50 0.86-0.97x, YOLOv5s 0.83-0.86x,
     * BERT-base 0.88-0.96x the AVX2 tier's time on Zen 4: the widest tier
     * is the default everywhere. */
    g_cpu.zmm_halves = amd && g_cpu.family == 0x19 && g_cpu.max_isa == NNF_ISA_AVX512;
    /* Zen 1 and Zen+ (family 17h below model 30h; Zen 2 from 30h has 256-bit
     * pipes) and Hygon's Dhyana (18h) run each ymm operation as two 128-bit
     * halves on two FMA pipes: 16 FLOPs a cycle, half of Zen 2's, while
     * loads and the memory stream keep their speed. */
    g_cpu.ymm_halves =
        amd && ((g_cpu.family == 0x17 && g_cpu.model < 0x30) || g_cpu.family == 0x18);
    g_cpu.bcast_costly = !strcmp(g_cpu.vendor, "GenuineIntel");
    /* Linux hands out the tiles' 8 KiB of state to processes that ask
     * (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, 18); for every thread */
#ifdef __linux__
    if (g_cpu.amx_hw && g_cpu.max_isa == NNF_ISA_AVX512)
        g_cpu.amx_hw = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    else
        g_cpu.amx_hw = false;
#else
    g_cpu.amx_hw = false;
#endif
#ifdef NNF_AVX512_EMULATED
    /* A test build: the AVX-512 files run on AVX2 through SIMDe, and the
     * build exists to run that tier, so it is the default too. */
    if (g_cpu.max_isa == NNF_ISA_AVX2)
        g_cpu.max_isa = NNF_ISA_AVX512;
#endif
}
#endif

static void detect(void) {
    memset(&g_cpu, 0, sizeof g_cpu);
    g_cpu.max_isa = NNF_ISA_SCALAR;
#ifdef NNF_X86
    detect_x86();
#endif
    /* Sensible figures when CPUID (a hypervisor) reports nothing. */
    if (!g_cpu.l1d)
        g_cpu.l1d = 32 * 1024;
    if (!g_cpu.l2)
        g_cpu.l2 = 256 * 1024;
    if (!g_cpu.l3)
        g_cpu.l3 = 8 * 1024 * 1024;

    nnf_isa isa = g_cpu.max_isa;
    const char *env = getenv("NNF_ISA");
    if (env && *env) {
        nnf_isa want;
        if (!nnf_isa_parse(env, &want)) {
            NNF_LOG_WARN("NNF_ISA=%s is not one of scalar, avx2, avx512; using %s", env,
                         nnf_isa_name(isa));
        } else if (want > g_cpu.max_isa) {
            NNF_LOG_WARN("NNF_ISA=%s exceeds what this CPU supports; using %s", env,
                         nnf_isa_name(isa));
        } else {
            isa = want;
        }
    }
    atomic_store(&g_isa, (int)isa);
    const char *amx = getenv("NNF_AMX");
    g_cpu.amx = g_cpu.amx_hw && !(amx && !strcmp(amx, "0"));
#ifdef NNF_AVX512_EMULATED
    g_cpu.amx = false; /* its tiles are C loops: on only where a test asks */
#endif
}

const nnf_cpu *nnf_cpu_get(void) {
    pthread_once(&g_once, detect);
    return &g_cpu;
}

nnf_isa nnf_cpu_isa(void) {
    pthread_once(&g_once, detect);
    return (nnf_isa)atomic_load(&g_isa);
}

nnf_isa nnf_cpu_force_isa(nnf_isa isa) {
    pthread_once(&g_once, detect);
    if (isa > g_cpu.max_isa)
        isa = g_cpu.max_isa;
    if (isa < NNF_ISA_SCALAR)
        isa = NNF_ISA_SCALAR;
    atomic_store(&g_isa, (int)isa);
    return isa;
}

/* The tests' switch for one of the features' flags: the previous value. */
static bool force_flag(bool *flag, bool on) {
    pthread_once(&g_once, detect);
    bool was = *flag;
    *flag = on;
    return was;
}

bool nnf_cpu_force_bcast_costly(bool on) {
    return force_flag(&g_cpu.bcast_costly, on);
}

bool nnf_cpu_force_ymm_halves(bool on) {
    return force_flag(&g_cpu.ymm_halves, on);
}

bool nnf_cpu_force_amx(bool on) {
    pthread_once(&g_once, detect);
    bool was = g_cpu.amx;
#ifdef NNF_AVX512_EMULATED
    g_cpu.amx = on && g_cpu.max_isa == NNF_ISA_AVX512;
#else
    g_cpu.amx = on && g_cpu.amx_hw;
#endif
    return was;
}

const char *nnf_isa_name(nnf_isa isa) {
    switch (isa) {
    case NNF_ISA_SCALAR: return "scalar";
    case NNF_ISA_AVX2: return "avx2";
    case NNF_ISA_AVX512: return "avx512";
    }
    return "?";
}

bool nnf_isa_parse(const char *s, nnf_isa *out) {
    static const struct {
        const char *name;
        nnf_isa isa;
    } names[] = {{"scalar", NNF_ISA_SCALAR}, {"avx2", NNF_ISA_AVX2}, {"avx512", NNF_ISA_AVX512}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strcasecmp(s, names[i].name)) {
            *out = names[i].isa;
            return true;
        }
    }
    return false;
}
