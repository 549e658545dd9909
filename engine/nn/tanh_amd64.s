//go:build !noasm && !purego

#include "textflag.h"
#include "go_asm.h"

// TANH8 sets Y9 to tanh32 of the 8 float32 in Y10, with tanh32's operations in its order
// (tanh.go), in float64: Z0 = x, Z1 = |x|, Z4 the small-argument branch, Z12 the other, then
// the sign of x and the rounding to float32; NaN lanes take x itself. AX points to the
// tanhConstants.
#define TANH8 \
	VCVTPS2PD Y10, Z0;                                    \
	VPANDQ.BCST tanhConstants_absMask(AX), Z0, Z1;        \
	VMULPD Z1, Z1, Z2;                                    \
	VMULPD Z1, Z2, Z2;                                    \
	VMOVAPD Z1, Z4;                                       \
	VFMADD231PD.BCST tanhConstants_negThird(AX), Z2, Z4;  \
	VADDPD Z1, Z1, Z5;                                    \
	VMINPD.BCST tanhConstants_zMax(AX), Z5, Z5;           \
	VMULPD.BCST tanhConstants_log2e(AX), Z5, Z6;          \
	VRNDSCALEPD $0, Z6, Z6;                               \
	VMOVAPD Z5, Z7;                                       \
	VFMADD231PD.BCST tanhConstants_negLn2Hi(AX), Z6, Z7;  \
	VFMADD231PD.BCST tanhConstants_negLn2Lo(AX), Z6, Z7;  \
	VBROADCASTSD tanhConstants_taylor+96(AX), Z8;         \
	VFMADD213PD.BCST tanhConstants_taylor+88(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+80(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+72(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+64(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+56(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+48(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+40(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+32(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+24(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+16(AX), Z7, Z8; \
	VFMADD213PD.BCST tanhConstants_taylor+8(AX), Z7, Z8;  \
	VFMADD213PD.BCST tanhConstants_taylor+0(AX), Z7, Z8;  \
	VCVTPD2QQ Z6, Z11;                                    \
	VPADDQ.BCST tanhConstants_bias(AX), Z11, Z11;         \
	VPSLLQ $52, Z11, Z11;                                 \
	VMULPD Z11, Z8, Z8;                                   \
	VADDPD.BCST tanhConstants_one(AX), Z8, Z8;            \
	VBROADCASTSD tanhConstants_two(AX), Z9;               \
	VDIVPD Z8, Z9, Z9;                                    \
	VBROADCASTSD tanhConstants_one(AX), Z12;              \
	VSUBPD Z9, Z12, Z12;                                  \
	VCMPPD.BCST $1, tanhConstants_small(AX), Z1, K1;      \
	VMOVAPD Z4, K1, Z12;                                  \
	VPANDQ.BCST tanhConstants_signMask(AX), Z0, Z13;      \
	VPORQ Z13, Z12, Z12;                                  \
	VCVTPD2PS Z12, Y9;                                    \
	VCMPPS $3, Y10, Y10, K2;                              \
	VMOVUPS Y10, K2, Y9

// func tanh32AVX512(dst, src *float32, n int, c *tanhConstants)
TEXT ·tanh32AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), AX

loop:
	CMPQ CX, $8
	JLT  tail
	VMOVUPS (SI), Y10
	TANH8
	VMOVUPS Y9, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  loop

tail:
	TESTQ CX, CX
	JZ    done
	MOVL  $1, DX
	SHLL  CX, DX
	DECL  DX
	KMOVW DX, K3
	VMOVUPS.Z (SI), K3, Y10
	TANH8
	VMOVUPS Y9, K3, (DI)

done:
	VZEROUPPER
	RET
