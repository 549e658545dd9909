//go:build !noasm && !purego

#include "textflag.h"

// Offsets into avxParams (slot index × 32 bytes) of the slots used here; they
// must match the slot constants in gauss_amd64.go (TestLaplaceSlotOffsets
// checks).
#define ONE64 864
#define EXP52 928
#define P2M53 992
#define FRACMASK 1024
#define SQRT2ADJ 1056
#define BIT52 1088
#define EXP3FF 1120
#define K1023 1152
#define TWOF 1184
#define HALF 1216
#define L1 1312
#define L2 1344
#define L3 1376
#define L4 1408
#define L5 1440
#define L6 1472
#define L7 1504
#define LN2HI 1536
#define LN2LO 1568

// UNIT sets, for the four 53-bit integers m, u = (m mod 2⁵² + 1)·2⁻⁵² and fl
// = ((m >> 52) ^ 1) << 63, the mask that flips the sign of ln u where the
// sign bit s = m >> 52 is 0. m mod 2⁵² < 2⁵² converts exactly as
// (2⁵² + a) − 2⁵²; adding 1 is exact, and the scaling by 2⁻⁵³ and then 2 is
// the exact scaling by 2⁻⁵² of laplaceUnit.
#define UNIT(m, u, fl) \
	VPSRLQ $52, m, fl;            \
	VPXOR  ONE64(AX), fl, fl;     \
	VPSLLQ $63, fl, fl;           \
	VPAND  FRACMASK(AX), m, u;    \
	VPOR   EXP52(AX), u, u;       \
	VSUBPD EXP52(AX), u, u;       \
	VADDPD EXP3FF(AX), u, u;      \
	VMULPD P2M53(AX), u, u;       \
	VADDPD u, u, u

// LOGU replaces the four u ∈ [2⁻⁵³, 1] in x with ln u, with the operations of
// logUnit (as in radiusAVX2); t2…t10 are scratch. t2 = k, t4 = f, t3 = s.
#define LOGU(x, t2, t3, t4, t7, t8, t9, t10) \
	VPAND       FRACMASK(AX), x, t2; \
	VPADDQ      SQRT2ADJ(AX), t2, t3; \
	VPAND       BIT52(AX), t3, t3;   \
	VPXOR       EXP3FF(AX), t3, t4;  \
	VPOR        t2, t4, t4;          \
	VPSRLQ      $52, x, t2;          \
	VPSRLQ      $52, t3, t3;         \
	VPADDQ      t3, t2, t2;          \
	VPOR        EXP52(AX), t2, t2;   \
	VSUBPD      K1023(AX), t2, t2;   \
	VSUBPD      EXP3FF(AX), t4, t4;  \
	VADDPD      TWOF(AX), t4, t3;    \
	VDIVPD      t3, t4, t3;          \
	VMULPD      t3, t3, t7;          \
	VMULPD      t7, t7, t8;          \
	VMOVUPD     L7(AX), t9;          \
	VFMADD213PD L5(AX), t8, t9;      \
	VFMADD213PD L3(AX), t8, t9;      \
	VFMADD213PD L1(AX), t8, t9;      \
	VMOVUPD     L6(AX), t10;         \
	VFMADD213PD L4(AX), t8, t10;     \
	VFMADD213PD L2(AX), t8, t10;     \
	VMULPD      t10, t8, t10;        \
	VFMADD231PD t9, t7, t10;         \
	VMULPD      HALF(AX), t4, t9;    \
	VMULPD      t4, t9, t9;          \
	VMULPD      LN2LO(AX), t2, t7;   \
	VADDPD      t10, t9, t10;        \
	VFMADD231PD t10, t3, t7;         \
	VSUBPD      t7, t9, t9;          \
	VSUBPD      t4, t9, t9;          \
	VMULPD      LN2HI(AX), t2, x;    \
	VSUBPD      t9, x, x

// func laplaceAVX2(p *avxParams, buf *float64, groups int)
//
// For each group of four blocks, buf holds four v = m1+1 and four m2 as
// written by philoxAVX2 (lanes j, j+2, j+1, j+3); they are replaced by the
// Laplace values of m1 and m2 of the four blocks in stream order.
TEXT ·laplaceAVX2(SB), NOSPLIT, $0-24
	MOVQ  p+0(FP), AX
	MOVQ  buf+8(FP), DI
	MOVQ  groups+16(FP), CX
	TESTQ CX, CX
	JLE   ldone

lloop:
	VMOVDQU (DI), Y0
	VPSUBQ  ONE64(AX), Y0, Y0 // m1
	VMOVDQU 32(DI), Y5        // m2
	UNIT(Y0, Y1, Y6)
	UNIT(Y5, Y11, Y12)
	LOGU(Y1, Y2, Y3, Y4, Y7, Y8, Y9, Y10)
	LOGU(Y11, Y0, Y5, Y13, Y14, Y15, Y2, Y3)
	VPXOR     Y6, Y1, Y1   // values of m1, lanes j, j+2, j+1, j+3
	VPXOR     Y12, Y11, Y11 // values of m2
	VUNPCKLPD Y11, Y1, Y3  // blocks j, j+1
	VUNPCKHPD Y11, Y1, Y4  // blocks j+2, j+3
	VMOVUPD   Y3, (DI)
	VMOVUPD   Y4, 32(DI)
	ADDQ      $64, DI
	DECQ      CX
	JNZ       lloop
	VZEROUPPER

ldone:
	RET
