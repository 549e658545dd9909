//go:build !noasm && !purego

#include "textflag.h"

// Offsets into avxParams (slot index × 32 bytes); they must match the slot
// constants in gauss_amd64.go (TestAVXSlotOffsets checks).
#define CTRINIT 0
#define FOUR 32
#define EIGHT 64
#define M0 96
#define M1 128
#define R0X0 160
#define R0X1 192
#define R0C3 224
#define K1A 256
#define K1B 288
#define K2A 320
#define K2B 352
#define K3A 384
#define K3B 416
#define K4A 448
#define K4B 480
#define K5A 512
#define K5B 544
#define K6A 576
#define K6B 608
#define K7A 640
#define K7B 672
#define K8A 704
#define K8B 736
#define K9A 768
#define K9B 800
#define MASK32 832
#define ONE64 864
#define TWO64 896
#define EXP52 928
#define EXP84 960
#define P2M53 992
#define FRACMASK 1024
#define SQRT2ADJ 1056
#define BIT52 1088
#define EXP3FF 1120
#define K1023 1152
#define TWOF 1184
#define HALF 1216
#define MINUS2 1248
#define MHALF 1280
#define L1 1312
#define L2 1344
#define L3 1376
#define L4 1408
#define L5 1440
#define L6 1472
#define L7 1504
#define LN2HI 1536
#define LN2LO 1568
#define MASK50 1600
#define BIT50 1632
#define PI4U50 1664
#define S0 1696
#define S1 1728
#define S2 1760
#define S3 1792
#define S4 1824
#define S5 1856
#define C0 1888
#define C1 1920
#define C2 1952
#define C3 1984
#define C4 2016
#define C5 2048
// Pass 1: Philox. Two groups of four blocks per iteration, interleaved for
// instruction-level parallelism. Words are 32-bit values in the low halves of
// 64-bit lanes; the high halves are don't-care, as VPMULUDQ and the final
// packing read only the low halves. Y13 = M0, Y14 = M1. One round on the
// state (x0, x1, x2, x3) with free registers (t0, t1):
//   x0' = hi(M1·x2) ^ x1 ^ k0,  x1' = lo(M1·x2),
//   x2' = hi(M0·x0) ^ x3 ^ k1,  x3' = lo(M0·x0),
// leaving the state in (x0, t1, x2, t0) and freeing (x1, x3), so the
// register roles rotate with period four instead of being moved.
#define PHILOX_ROUND(x0, x1, x2, x3, t0, t1, k0, k1) \
	VPMULUDQ Y13, x0, t0;    \
	VPMULUDQ Y14, x2, t1;    \
	VPSRLQ   $32, t1, x0;    \
	VPXOR    x1, x0, x0;     \
	VPXOR    k0(AX), x0, x0; \
	VPSRLQ   $32, t0, x2;    \
	VPXOR    x3, x2, x2;     \
	VPXOR    k1(AX), x2, x2

// Rounds of group A (Y1..Y6) and group B (Y7..Y12) interleaved.
#define ROUND2(a1, a2, a3, a4, a5, a6, b1, b2, b3, b4, b5, b6, k0, k1) \
	PHILOX_ROUND(a1, a2, a3, a4, a5, a6, k0, k1); \
	PHILOX_ROUND(b1, b2, b3, b4, b5, b6, k0, k1)

// PACK stores v = ((x0<<32 | x1) >> 11) + 1 and m2 = (x2<<32 | x3) >> 11 of
// one group (x0..x3 in a..d, Y15 = MASK32) at off(DI) and
// off+32(DI).
#define PACK(a, b, c, d, off) \
	VPSLLQ  $32, a, a;         \
	VPAND   Y15, b, b;         \
	VPOR    b, a, a;           \
	VPSRLQ  $11, a, a;         \
	VPADDQ  ONE64(AX), a, a;   \
	VPSLLQ  $32, c, c;         \
	VPAND   Y15, d, d;         \
	VPOR    d, c, c;           \
	VPSRLQ  $11, c, c;         \
	VMOVDQU a, off(DI);        \
	VMOVDQU c, off+32(DI)

// func philoxAVX2(p *avxParams, dst *uint64, pairs int, j uint32)
//
// For blocks j … j+8·pairs−1 it writes, per group of four blocks in lane
// order (j, j+2, j+1, j+3), the four values v = m1+1 and then the four m2.
TEXT ·philoxAVX2(SB), NOSPLIT, $0-28
	MOVQ p+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ pairs+16(FP), CX
	MOVL j+24(FP), DX
	TESTQ CX, CX
	JLE  pdone
	MOVQ DX, X0
	VPBROADCASTQ X0, Y0
	VPADDQ  CTRINIT(AX), Y0, Y0 // group A lanes: blocks j, j+2, j+1, j+3
	VMOVDQU M0(AX), Y13
	VMOVDQU M1(AX), Y14
	VMOVDQU MASK32(AX), Y15

ploop:
	// Round 1 with counter words 1-3 and the key folded in (philoxStream):
	// x0 = R0X0, x1 = R0X1, x2 = hi(M0·j) ^ R0C3, x3 = lo(M0·j).
	VPADDQ   FOUR(AX), Y0, Y6 // group B counters
	VPMULUDQ Y13, Y0, Y4
	VPMULUDQ Y13, Y6, Y10
	VPSRLQ   $32, Y4, Y3
	VPSRLQ   $32, Y10, Y9
	VPXOR    R0C3(AX), Y3, Y3
	VPXOR    R0C3(AX), Y9, Y9
	VMOVDQU  R0X0(AX), Y1
	VMOVDQU  R0X1(AX), Y2
	VMOVDQA  Y1, Y7
	VMOVDQA  Y2, Y8
	ROUND2(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, K1A, K1B)
	ROUND2(Y1, Y6, Y3, Y5, Y2, Y4, Y7, Y12, Y9, Y11, Y8, Y10, K2A, K2B)
	ROUND2(Y1, Y4, Y3, Y2, Y6, Y5, Y7, Y10, Y9, Y8, Y12, Y11, K3A, K3B)
	ROUND2(Y1, Y5, Y3, Y6, Y4, Y2, Y7, Y11, Y9, Y12, Y10, Y8, K4A, K4B)
	ROUND2(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, K5A, K5B)
	ROUND2(Y1, Y6, Y3, Y5, Y2, Y4, Y7, Y12, Y9, Y11, Y8, Y10, K6A, K6B)
	ROUND2(Y1, Y4, Y3, Y2, Y6, Y5, Y7, Y10, Y9, Y8, Y12, Y11, K7A, K7B)
	ROUND2(Y1, Y5, Y3, Y6, Y4, Y2, Y7, Y11, Y9, Y12, Y10, Y8, K8A, K8B)
	ROUND2(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, K9A, K9B)
	PACK(Y1, Y6, Y3, Y5, 0)
	PACK(Y7, Y12, Y9, Y11, 64)
	ADDQ   $128, DI
	VPADDQ EIGHT(AX), Y0, Y0
	DECQ   CX
	JNZ    ploop
	VZEROUPPER

pdone:
	RET

// func radiusAVX2(p *avxParams, buf *float64, groups int)
//
// Pass 2: for each group of four blocks, buf holds four v = m1+1 and four m2
// as written by philoxAVX2; the v are replaced by r = √(−2 ln u1),
// u1 = v·2⁻⁵³ (logUnit). Iterations are independent and short, so the core
// overlaps several of them.
TEXT ·radiusAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	MOVQ buf+8(FP), DI
	MOVQ groups+16(FP), CX
	TESTQ CX, CX
	JLE  rdone

rloop:
	VMOVDQU (DI), Y5
	// u1 = float64(v)·2⁻⁵³, v ≤ 2⁵³ converted exactly as
	// ((2⁸⁴ + hi·2³²) − 2⁸⁴) + ((2⁵² + lo) − 2⁵²).
	VPAND  MASK32(AX), Y5, Y1
	VPOR   EXP52(AX), Y1, Y1
	VSUBPD EXP52(AX), Y1, Y1
	VPSRLQ $32, Y5, Y2
	VPOR   EXP84(AX), Y2, Y2
	VSUBPD EXP84(AX), Y2, Y2
	VADDPD Y2, Y1, Y1
	VMULPD P2M53(AX), Y1, Y1

	// ln u1 (logUnit): Y2 = k, Y4 = f, Y3 = s.
	VPAND  FRACMASK(AX), Y1, Y2
	VPADDQ SQRT2ADJ(AX), Y2, Y3
	VPAND  BIT52(AX), Y3, Y3
	VPXOR  EXP3FF(AX), Y3, Y4
	VPOR   Y2, Y4, Y4
	VPSRLQ $52, Y1, Y2
	VPSRLQ $52, Y3, Y3
	VPADDQ Y3, Y2, Y2
	VPOR   EXP52(AX), Y2, Y2
	VSUBPD K1023(AX), Y2, Y2
	VSUBPD EXP3FF(AX), Y4, Y4
	VADDPD TWOF(AX), Y4, Y3
	VDIVPD Y3, Y4, Y3
	VMULPD Y3, Y3, Y7 // s2
	VMULPD Y7, Y7, Y8 // s4
	VMOVUPD     L7(AX), Y9
	VFMADD213PD L5(AX), Y8, Y9
	VFMADD213PD L3(AX), Y8, Y9
	VFMADD213PD L1(AX), Y8, Y9 // p1
	VMOVUPD     L6(AX), Y10
	VFMADD213PD L4(AX), Y8, Y10
	VFMADD213PD L2(AX), Y8, Y10 // p2
	VMULPD      Y10, Y8, Y10    // s4·p2
	VFMADD231PD Y9, Y7, Y10     // R = s2·p1 + s4·p2
	VMULPD      HALF(AX), Y4, Y9
	VMULPD      Y4, Y9, Y9      // hfsq = (0.5·f)·f
	VMULPD      LN2LO(AX), Y2, Y7
	VADDPD      Y10, Y9, Y10    // hfsq + R
	VFMADD231PD Y10, Y3, Y7     // lo = s·(hfsq+R) + k·ln2Lo
	VSUBPD      Y7, Y9, Y9      // hfsq − lo
	VSUBPD      Y4, Y9, Y9      // − f
	VMULPD      LN2HI(AX), Y2, Y2
	VSUBPD      Y9, Y2, Y2      // ln u1
	VMULPD      MINUS2(AX), Y2, Y2
	VSQRTPD     Y2, Y2          // r = √(−2 ln u1)

	VMOVUPD Y2, (DI)
	ADDQ    $64, DI
	DECQ    CX
	JNZ     rloop
	VZEROUPPER

rdone:
	RET

// func rotateAVX2(p *avxParams, buf *float64, groups int)
//
// Pass 3: for each group, buf holds four r (from radiusAVX2) and four m2; they
// are replaced by z0 = r·cos(2πu2), z1 = r·sin(2πu2) of the four blocks in
// stream order (sinCos2Pi).
TEXT ·rotateAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	MOVQ buf+8(FP), DI
	MOVQ groups+16(FP), CX
	TESTQ CX, CX
	JLE  odone

oloop:
	VMOVUPD (DI), Y2
	VMOVDQU 32(DI), Y6

	// sin and cos of 2π·m2·2⁻⁵³ (sinCos2Pi): Y1 = octant o.
	VPSRLQ $50, Y6, Y1
	VPAND  MASK50(AX), Y6, Y6
	VPAND  ONE64(AX), Y1, Y3
	VPXOR  Y4, Y4, Y4
	VPSUBQ Y3, Y4, Y4 // odd octant mask
	VPXOR  Y4, Y6, Y6
	VPSUBQ Y4, Y6, Y6
	VPAND  BIT50(AX), Y4, Y3
	VPADDQ Y3, Y6, Y6 // r reflected in odd octants
	VPOR   EXP52(AX), Y6, Y6
	VSUBPD EXP52(AX), Y6, Y6
	VMULPD PI4U50(AX), Y6, Y6 // x
	VMULPD Y6, Y6, Y7         // zz
	VMOVUPD     S0(AX), Y8
	VFMADD213PD S1(AX), Y7, Y8
	VFMADD213PD S2(AX), Y7, Y8
	VFMADD213PD S3(AX), Y7, Y8
	VFMADD213PD S4(AX), Y7, Y8
	VFMADD213PD S5(AX), Y7, Y8
	VMULPD      Y7, Y6, Y9
	VFMADD231PD Y8, Y9, Y6 // s = (x·zz)·ps + x
	VMOVUPD     C0(AX), Y8
	VFMADD213PD C1(AX), Y7, Y8
	VFMADD213PD C2(AX), Y7, Y8
	VFMADD213PD C3(AX), Y7, Y8
	VFMADD213PD C4(AX), Y7, Y8
	VFMADD213PD C5(AX), Y7, Y8
	VMOVUPD     EXP3FF(AX), Y10
	VFMADD231PD MHALF(AX), Y7, Y10 // 1 − zz/2
	VMULPD      Y7, Y7, Y9
	VFMADD231PD Y8, Y9, Y10 // c = zz²·pc + (1 − zz/2)

	// Octant symmetries: swap sin and cos in octants 1, 2, 5, 6; negate sin
	// in 4-7 and cos in 2-5.
	VPSRLQ $1, Y1, Y3
	VPXOR  Y1, Y3, Y3
	VPAND  ONE64(AX), Y3, Y3
	VPXOR  Y4, Y4, Y4
	VPSUBQ Y3, Y4, Y4
	VPXOR  Y10, Y6, Y3
	VPAND  Y4, Y3, Y3
	VPXOR  Y3, Y6, Y6
	VPXOR  Y3, Y10, Y10
	VPSRLQ $2, Y1, Y3
	VPSLLQ $63, Y3, Y3
	VPXOR  Y3, Y6, Y6
	VPADDQ TWO64(AX), Y1, Y3
	VPSRLQ $2, Y3, Y3
	VPSLLQ $63, Y3, Y3
	VPXOR  Y3, Y10, Y10

	// z0 = r·cos, z1 = r·sin, stored as (z0, z1) of blocks j, j+1, j+2, j+3.
	VMULPD    Y10, Y2, Y10
	VMULPD    Y6, Y2, Y6
	VUNPCKLPD Y6, Y10, Y3
	VUNPCKHPD Y6, Y10, Y4
	VMOVUPD   Y3, (DI)
	VMOVUPD   Y4, 32(DI)
	ADDQ      $64, DI
	DECQ CX
	JNZ  oloop
	VZEROUPPER

odone:
	RET

// func axpyF64AVX2(dst *float64, z *float64, n int, std float64)
//
// dst[i] = FMA(std, z[i], dst[i]) for i < n, n a multiple of 4.
TEXT ·axpyF64AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         z+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD std+24(FP), Y0
	SHRQ         $2, CX
	JZ           a64done

a64loop:
	VMOVUPD     (DI), Y1
	VFMADD231PD (SI), Y0, Y1
	VMOVUPD     Y1, (DI)
	ADDQ        $32, DI
	ADDQ        $32, SI
	DECQ        CX
	JNZ         a64loop
	VZEROUPPER

a64done:
	RET

// func axpyF32AVX2(dst *float32, z *float64, n int, std float64)
//
// dst[i] = float32(FMA(std, z[i], float64(dst[i]))) for i < n, n a multiple
// of 4. The widening is exact and the narrowing rounds to nearest even, as
// Go's conversions do.
TEXT ·axpyF32AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         z+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD std+24(FP), Y0
	SHRQ         $2, CX
	JZ           a32done

a32loop:
	VCVTPS2PD   (DI), Y1
	VFMADD231PD (SI), Y0, Y1
	VCVTPD2PSY  Y1, X1
	VMOVUPS     X1, (DI)
	ADDQ        $16, DI
	ADDQ        $32, SI
	DECQ        CX
	JNZ         a32loop
	VZEROUPPER

a32done:
	RET

// func cvtF32AVX2(dst *float32, z *float64, n int)
//
// dst[i] = float32(z[i]) for i < n, n a multiple of 4.
TEXT ·cvtF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $2, CX
	JZ   c32done

c32loop:
	VCVTPD2PSY (SI), X1
	VMOVUPS    X1, (DI)
	ADDQ       $16, DI
	ADDQ       $32, SI
	DECQ       CX
	JNZ        c32loop
	VZEROUPPER

c32done:
	RET
