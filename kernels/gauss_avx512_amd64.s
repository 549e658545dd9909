//go:build !noasm && !purego

#include "textflag.h"
#include "go_asm.h"

// The kernel makes a buffer of 8-block groups in three passes, each over all
// the groups, so that every loop has short dependency chains and several
// groups in flight: Philox writes each group's eight words 2³²·x₀ + x₁ and
// eight words 2³²·x₂ + x₃ (lanes in block order 0, 4, 1, 5, 2, 6, 3, 7 of
// the group); the radius pass replaces the first eight with r = √(−2 ln u₁);
// the rotation pass replaces the sixteen words with the group's sixteen
// normals in stream order. Operands of avx512Params are read by the offsets
// in go_asm.h, broadcast to the eight 64-bit lanes.

// Rounds 0–2 of Philox4x32-10 on eight blocks whose counters are in c (see
// avx512Params): x₀ in x0 and x₂ in x2, x₁ and x₃ the low halves of the
// products pb and qb; pa and qa are scratch. Z30 = M₀, Z31 = M₁.
#define PHILOX_START(c, x0, x2, pa, pb, qa, qb) \
	VPMULUDQ        Z30, c, qa;                            \
	VPSRLQ          $32, qa, x2;                           \
	VPXORQ.BCST     avx512Params_r0c3(AX), x2, x2;         \
	VPMULUDQ        Z31, x2, pa;                           \
	VPSRLQ          $32, pa, x0;                           \
	VPXORQ.BCST     avx512Params_c1a(AX), x0, x0;          \
	VPXORQ.BCST     avx512Params_c1b(AX), qa, x2;          \
	VPMULUDQ        Z31, x2, pb;                           \
	VPMULUDQ        Z30, x0, qb;                           \
	VPSRLQ          $32, pb, x0;                           \
	VPTERNLOGQ.BCST $0x96, avx512Params_k2a(AX), pa, x0;   \
	VPSRLQ          $32, qb, x2;                           \
	VPXORQ.BCST     avx512Params_c2b(AX), x2, x2

// One Philox round: the new products go to pn and qn, the previous ones are
// in po and qo.
#define PHILOX_ROUND(x0, x2, pn, po, qn, qo, ka, kb) \
	VPMULUDQ        Z31, x2, pn;     \
	VPMULUDQ        Z30, x0, qn;     \
	VPSRLQ          $32, pn, x0;     \
	VPTERNLOGQ.BCST $0x96, ka, po, x0; \
	VPSRLQ          $32, qn, x2;     \
	VPTERNLOGQ.BCST $0x96, kb, qo, x2

// Rounds 3–8.
#define PHILOX_MIDDLE(x0, x2, pa, pb, qa, qb) \
	PHILOX_ROUND(x0, x2, pa, pb, qa, qb, avx512Params_k3a(AX), avx512Params_k3b(AX)); \
	PHILOX_ROUND(x0, x2, pb, pa, qb, qa, avx512Params_k4a(AX), avx512Params_k4b(AX)); \
	PHILOX_ROUND(x0, x2, pa, pb, qa, qb, avx512Params_k5a(AX), avx512Params_k5b(AX)); \
	PHILOX_ROUND(x0, x2, pb, pa, qb, qa, avx512Params_k6a(AX), avx512Params_k6b(AX)); \
	PHILOX_ROUND(x0, x2, pa, pb, qa, qb, avx512Params_k7a(AX), avx512Params_k7b(AX)); \
	PHILOX_ROUND(x0, x2, pb, pa, qb, qa, avx512Params_k8a(AX), avx512Params_k8b(AX))

// Round 9, paired, stored at off(DI): 2³²·x₀ + x₁ = (M₁·x₂) ⊕ (x₁·2³²) ⊕
// (k₀·2³²), and 2³²·x₂ + x₃ likewise, with x₁, x₃ in pb, qb.
#define PHILOX_END(x0, x2, pa, pb, qa, qb, off) \
	VPMULUDQ        Z31, x2, pa;                         \
	VPMULUDQ        Z30, x0, qa;                         \
	VPSLLQ          $32, pb, pb;                         \
	VPTERNLOGQ.BCST $0x96, avx512Params_k9a(AX), pb, pa; \
	VPSLLQ          $32, qb, qb;                         \
	VPTERNLOGQ.BCST $0x96, avx512Params_k9b(AX), qb, qa; \
	VMOVDQU64       pa, off(DI);                         \
	VMOVDQU64       qa, off+64(DI)

// RADIUS replaces the eight words 2³²·x₀ + x₁ at off(DI) with
// r = √(−2 ln u₁), u₁ = (m₁+1)·2⁻⁵³, m₁ = the word >> 11: logUnit with the
// doubled operands of avx512Params. Z31 = 2⁻⁵³; t0–t8 are scratch. In order:
// u₁ = m₁·2⁻⁵³ + 2⁻⁵³ (exact); t1 = frac; t2 = k, the exponent of the bits of
// u₁ plus the √2 adjustment (the carry into the exponent is i); t3 = frac +
// adjustment, whose bit 52 is i; y = frac | (0x3ff ⊕ i)·2⁵² by the bit select
// 0x72 (where 1.0 has a bit, ¬t3, else frac); f = y − 1; s = f/(2+f); s², s⁴;
// 2p₁, 2p₂, 2R; f² = 2·hfsq; 2lo; (2lo − f²) + 2f; −2k·ln2Hi minus that; √.
// (VPTERNLOGQ immediates: 0x96 is a ⊕ b ⊕ c, 0x78 is a ⊕ (b ∧ c).)
#define RADIUS(off, t0, t1, t2, t3, t4, t5, t6, t7, t8) \
	VPSRLQ           $11, off(DI), t0;                        \
	VCVTUQQ2PD       t0, t0;                                  \
	VFMADD213PD      Z31, Z31, t0;                            \
	VPANDQ.BCST      avx512Params_fracMask(AX), t0, t1;       \
	VPADDQ.BCST      avx512Params_sqrt2Adj(AX), t0, t2;       \
	VGETEXPPD        t2, t2;                                  \
	VPADDQ.BCST      avx512Params_sqrt2Adj(AX), t1, t3;       \
	VPTERNLOGQ.BCST  $0x72, avx512Params_one(AX), t3, t1;     \
	VSUBPD.BCST      avx512Params_one(AX), t1, t1;            \
	VADDPD.BCST      avx512Params_two(AX), t1, t3;            \
	VDIVPD           t3, t1, t3;                              \
	VMULPD           t3, t3, t4;                              \
	VMULPD           t4, t4, t5;                              \
	VBROADCASTSD     avx512Params_l7(AX), t6;                 \
	VFMADD213PD.BCST avx512Params_l5(AX), t5, t6;             \
	VFMADD213PD.BCST avx512Params_l3(AX), t5, t6;             \
	VFMADD213PD.BCST avx512Params_l1(AX), t5, t6;             \
	VBROADCASTSD     avx512Params_l6(AX), t7;                 \
	VFMADD213PD.BCST avx512Params_l4(AX), t5, t7;             \
	VFMADD213PD.BCST avx512Params_l2(AX), t5, t7;             \
	VMULPD           t7, t5, t7;                              \
	VFMADD231PD      t6, t4, t7;                              \
	VMULPD           t1, t1, t6;                              \
	VMULPD.BCST      avx512Params_ln2Lo(AX), t2, t8;          \
	VADDPD           t7, t6, t7;                              \
	VFMADD231PD      t7, t3, t8;                              \
	VSUBPD           t6, t8, t8;                              \
	VADDPD           t1, t1, t1;                              \
	VADDPD           t1, t8, t8;                              \
	VMULPD.BCST      avx512Params_ln2Hi(AX), t2, t2;          \
	VSUBPD           t8, t2, t2;                              \
	VSQRTPD          t2, t2;                                  \
	VMOVUPD          t2, off(DI)

// ROTATE replaces the eight radii at off(DI) and the eight words
// 2³²·x₂ + x₃ at off+64(DI) with the sixteen normals r·cos(2πu₂),
// r·sin(2πu₂) of the group in stream order (sinCos2Pi). Z31 = 2⁶¹; ko and
// ks are mask registers, t0–t10 scratch. The octant o is bits 61–63 of the
// word: ko = odd octant (bit 61), where the position ρ·2¹¹ is reflected to
// 2⁶¹ − ρ·2¹¹; t6 = word ⊕ (word << 1), whose bit 62 (bits 61 ≠ 62) swaps
// sin and cos (ks) and whose bit 63 (bits 62 ≠ 63) is cos's sign; sin's
// sign is bit 63. The lane order of the counters makes VUNPCKLPD/VUNPCKHPD
// of (r·cos, r·sin) the blocks 0–3 and 4–7 of the group.
#define ROTATE(off, ko, ks, t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10) \
	VMOVDQU64        off+64(DI), t0;                        \
	VPANDQ.BCST      avx512Params_posMask(AX), t0, t1;      \
	VPTESTMQ         Z31, t0, ko;                           \
	VPSUBQ           t1, Z31, ko, t1;                       \
	VCVTUQQ2PD       t1, t1;                                \
	VMULPD.BCST      avx512Params_pi4u61(AX), t1, t1;       \
	VMULPD           t1, t1, t2;                            \
	VBROADCASTSD     avx512Params_s0(AX), t3;               \
	VFMADD213PD.BCST avx512Params_s1(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_s2(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_s3(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_s4(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_s5(AX), t2, t3;           \
	VMULPD           t2, t1, t4;                            \
	VFMADD231PD      t3, t4, t1;                            \
	VBROADCASTSD     avx512Params_c0(AX), t3;               \
	VFMADD213PD.BCST avx512Params_c1(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_c2(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_c3(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_c4(AX), t2, t3;           \
	VFMADD213PD.BCST avx512Params_c5(AX), t2, t3;           \
	VBROADCASTSD     avx512Params_one(AX), t5;              \
	VFMADD231PD.BCST avx512Params_mhalf(AX), t2, t5;        \
	VMULPD           t2, t2, t4;                            \
	VFMADD231PD      t3, t4, t5;                            \
	VPSLLQ           $1, t0, t6;                            \
	VPXORQ           t0, t6, t6;                            \
	VPTESTMQ.BCST    avx512Params_bit62(AX), t6, ks;        \
	VBLENDMPD        t5, t1, ks, t7;                        \
	VBLENDMPD        t1, t5, ks, t8;                        \
	VPTERNLOGQ.BCST  $0x78, avx512Params_sign(AX), t0, t7;  \
	VPTERNLOGQ.BCST  $0x78, avx512Params_sign(AX), t6, t8;  \
	VMULPD           off(DI), t8, t8;                       \
	VMULPD           off(DI), t7, t7;                       \
	VUNPCKLPD        t7, t8, t9;                            \
	VUNPCKHPD        t7, t8, t10;                           \
	VMOVUPD          t9, off(DI);                           \
	VMOVUPD          t10, off+64(DI)

// func philoxAVX512(p *avx512Params, buf *uint64, groups int, j uint32)
TEXT ·philoxAVX512(SB), NOSPLIT, $0-28
	MOVQ  p+0(FP), AX
	MOVQ  buf+8(FP), DI
	MOVQ  groups+16(FP), CX
	MOVL  j+24(FP), DX
	TESTQ CX, CX
	JLE   pdone
	VPBROADCASTQ DX, Z24
	VPADDQ       avx512Params_ctr(AX), Z24, Z24 // block counters of group 0
	VPBROADCASTQ avx512Params_inc(AX), Z25      // 8
	VPADDQ       Z25, Z25, Z26                  // 16
	VPADDQ       Z25, Z26, Z27                  // 24
	VPADDQ       Z26, Z26, Z28                  // 32
	VPBROADCASTQ avx512Params_m0(AX), Z30
	VPBROADCASTQ avx512Params_m1(AX), Z31
	CMPQ         CX, $4
	JLT          philox1

philox4: // four groups per iteration
	VPADDQ Z25, Z24, Z8
	VPADDQ Z26, Z24, Z14
	VPADDQ Z27, Z24, Z20
	PHILOX_START(Z24, Z0, Z1, Z2, Z3, Z4, Z5)
	PHILOX_START(Z8, Z6, Z7, Z8, Z9, Z10, Z11)
	PHILOX_START(Z14, Z12, Z13, Z14, Z15, Z16, Z17)
	PHILOX_START(Z20, Z18, Z19, Z20, Z21, Z22, Z23)
	PHILOX_MIDDLE(Z0, Z1, Z2, Z3, Z4, Z5)
	PHILOX_MIDDLE(Z6, Z7, Z8, Z9, Z10, Z11)
	PHILOX_MIDDLE(Z12, Z13, Z14, Z15, Z16, Z17)
	PHILOX_MIDDLE(Z18, Z19, Z20, Z21, Z22, Z23)
	PHILOX_END(Z0, Z1, Z2, Z3, Z4, Z5, 0)
	PHILOX_END(Z6, Z7, Z8, Z9, Z10, Z11, 128)
	PHILOX_END(Z12, Z13, Z14, Z15, Z16, Z17, 256)
	PHILOX_END(Z18, Z19, Z20, Z21, Z22, Z23, 384)
	VPADDQ Z28, Z24, Z24
	ADDQ   $512, DI
	SUBQ   $4, CX
	CMPQ   CX, $4
	JGE    philox4

philox1: // the rest, one group at a time
	TESTQ CX, CX
	JZ    pend
	PHILOX_START(Z24, Z0, Z1, Z2, Z3, Z4, Z5)
	PHILOX_MIDDLE(Z0, Z1, Z2, Z3, Z4, Z5)
	PHILOX_END(Z0, Z1, Z2, Z3, Z4, Z5, 0)
	VPADDQ Z25, Z24, Z24
	ADDQ   $128, DI
	DECQ   CX
	JMP    philox1

pend:
	VZEROUPPER

pdone:
	RET

// func boxMullerAVX512(p *avx512Params, buf *float64, groups int)
TEXT ·boxMullerAVX512(SB), NOSPLIT, $0-24
	MOVQ  p+0(FP), AX
	MOVQ  buf+8(FP), SI
	MOVQ  groups+16(FP), BX
	TESTQ BX, BX
	JLE   bdone

	// The radii, two groups per iteration, then one.
	VPBROADCASTQ avx512Params_p2m53(AX), Z31
	MOVQ         SI, DI
	MOVQ         BX, CX
	CMPQ         CX, $2
	JLT          radius1

radius2:
	RADIUS(0, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8)
	RADIUS(128, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17)
	ADDQ $256, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  radius2

radius1:
	TESTQ CX, CX
	JZ    rotate
	RADIUS(0, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8)

	// The rotations, two groups per iteration, then one.
rotate:
	VPBROADCASTQ avx512Params_bit61(AX), Z31
	MOVQ         SI, DI
	MOVQ         BX, CX
	CMPQ         CX, $2
	JLT          rotate1

rotate2:
	ROTATE(0, K1, K2, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10)
	ROTATE(128, K3, K4, Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21)
	ADDQ $256, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  rotate2

rotate1:
	TESTQ CX, CX
	JZ    bend
	ROTATE(0, K1, K2, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10)

bend:
	VZEROUPPER

bdone:
	RET

// TAILMASK sets K1 to the low n mod 8 bits (the elements of a last partial
// vector of eight), for n in CX, using R9.
#define TAILMASK \
	ANDQ  $7, CX;   \
	MOVQ  $1, R9;   \
	SHLQ  CX, R9;   \
	DECQ  R9;       \
	KMOVB R9, K1

// func axpyF64AVX512(dst *float64, z *float64, n int, std float64)
//
// dst[i] = FMA(std, z[i], dst[i]) for i < n.
TEXT ·axpyF64AVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         z+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD std+24(FP), Z0
	MOVQ         CX, DX
	SHRQ         $4, DX
	JZ           a64tail

a64loop:
	VMOVUPD     (DI), Z1
	VMOVUPD     64(DI), Z2
	VFMADD231PD (SI), Z0, Z1
	VFMADD231PD 64(SI), Z0, Z2
	VMOVUPD     Z1, (DI)
	VMOVUPD     Z2, 64(DI)
	ADDQ        $128, DI
	ADDQ        $128, SI
	DECQ        DX
	JNZ         a64loop

a64tail:
	TESTQ $8, CX
	JZ    a64mask
	VMOVUPD     (DI), Z1
	VFMADD231PD (SI), Z0, Z1
	VMOVUPD     Z1, (DI)
	ADDQ        $64, DI
	ADDQ        $64, SI

a64mask:
	TAILMASK
	VMOVUPD.Z   (DI), K1, Z1
	VMOVUPD.Z   (SI), K1, Z2
	VFMADD231PD Z2, Z0, Z1
	VMOVUPD     Z1, K1, (DI)
	VZEROUPPER
	RET

// func axpyF32AVX512(dst *float32, z *float64, n int, std float64)
//
// dst[i] = float32(FMA(std, z[i], float64(dst[i]))) for i < n: the widening
// is exact and the narrowing rounds to nearest even, as Go's conversions do.
TEXT ·axpyF32AVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         z+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD std+24(FP), Z0
	MOVQ         CX, DX
	SHRQ         $4, DX
	JZ           a32tail

a32loop:
	VCVTPS2PD   (DI), Z1
	VCVTPS2PD   32(DI), Z2
	VFMADD231PD (SI), Z0, Z1
	VFMADD231PD 64(SI), Z0, Z2
	VCVTPD2PS   Z1, Y1
	VCVTPD2PS   Z2, Y2
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	ADDQ        $64, DI
	ADDQ        $128, SI
	DECQ        DX
	JNZ         a32loop

a32tail:
	TESTQ $8, CX
	JZ    a32mask
	VCVTPS2PD   (DI), Z1
	VFMADD231PD (SI), Z0, Z1
	VCVTPD2PS   Z1, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, DI
	ADDQ        $64, SI

a32mask:
	TAILMASK
	VMOVUPS.Z   (DI), K1, Y1
	VCVTPS2PD   Y1, Z1
	VMOVUPD.Z   (SI), K1, Z2
	VFMADD231PD Z2, Z0, Z1
	VCVTPD2PS   Z1, Y1
	VMOVUPS     Y1, K1, (DI)
	VZEROUPPER
	RET

// func cvtF32AVX512(dst *float32, z *float64, n int)
//
// dst[i] = float32(z[i]) for i < n.
TEXT ·cvtF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ z+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ CX, DX
	SHRQ $4, DX
	JZ   c32tail

c32loop:
	VCVTPD2PS (SI), Y1
	VCVTPD2PS 64(SI), Y2
	VMOVUPS   Y1, (DI)
	VMOVUPS   Y2, 32(DI)
	ADDQ      $64, DI
	ADDQ      $128, SI
	DECQ      DX
	JNZ       c32loop

c32tail:
	TESTQ $8, CX
	JZ    c32mask
	VCVTPD2PS (SI), Y1
	VMOVUPS   Y1, (DI)
	ADDQ      $32, DI
	ADDQ      $64, SI

c32mask:
	TAILMASK
	VMOVUPD.Z (SI), K1, Z1
	VCVTPD2PS Z1, Y1
	VMOVUPS   Y1, K1, (DI)
	VZEROUPPER
	RET
