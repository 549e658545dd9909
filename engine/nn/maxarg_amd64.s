//go:build !noasm && !purego

#include "textflag.h"

// Lane j of a vector: j, for the argmax indices at + j.
DATA laneIndex<>+0(SB)/4, $0
DATA laneIndex<>+4(SB)/4, $1
DATA laneIndex<>+8(SB)/4, $2
DATA laneIndex<>+12(SB)/4, $3
DATA laneIndex<>+16(SB)/4, $4
DATA laneIndex<>+20(SB)/4, $5
DATA laneIndex<>+24(SB)/4, $6
DATA laneIndex<>+28(SB)/4, $7
DATA laneIndex<>+32(SB)/4, $8
DATA laneIndex<>+36(SB)/4, $9
DATA laneIndex<>+40(SB)/4, $10
DATA laneIndex<>+44(SB)/4, $11
DATA laneIndex<>+48(SB)/4, $12
DATA laneIndex<>+52(SB)/4, $13
DATA laneIndex<>+56(SB)/4, $14
DATA laneIndex<>+60(SB)/4, $15
GLOBL laneIndex<>(SB), RODATA|NOPTR, $64

// func maxArg32AVX512(o *float32, a *int32, src *float32, n int, at int32)
TEXT ·maxArg32AVX512(SB), NOSPLIT, $0-36
	MOVQ o+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ src+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL at+32(FP), AX
	VPBROADCASTD AX, Z2
	VMOVDQU32 laneIndex<>(SB), Z3
	VPADDD Z2, Z3, Z3            // Z3 = at + j
	MOVL $16, AX
	VPBROADCASTD AX, Z4

loop:
	CMPQ CX, $16
	JLT tail
	VMOVUPS (DX), Z0
	VMOVUPS (DI), Z1
	VCMPPS $0x1e, Z1, Z0, K1     // K1: src > o (GT_OQ)
	VMOVUPS Z0, K1, (DI)
	VMOVDQU32 Z3, K1, (SI)
	VPADDD Z4, Z3, Z3
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP loop

tail:
	TESTQ CX, CX
	JZ done
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K2
	VMOVUPS.Z (DX), K2, Z0
	VMOVUPS.Z (DI), K2, Z1
	VCMPPS $0x1e, Z1, Z0, K2, K1
	VMOVUPS Z0, K1, (DI)
	VMOVDQU32 Z3, K1, (SI)

done:
	VZEROUPPER
	RET
