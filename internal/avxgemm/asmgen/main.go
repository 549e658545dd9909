//go:build ignore

// Command asmgen writes gemm_amd64.s, the micro-kernels of package avxgemm:
//
//	go run asmgen/main.go > gemm_amd64.s
//
// Each AVX-512 kernel computes one tile of 16 rows of C and one 64-byte vector of columns (16
// float32 or 8 float64), accumulating Σₖ A[i,k]·B[k,:] in 16 vector registers with one fused
// multiply-add per row and k, k ascending, from +0; each AVX2 kernel does the same for a tile
// of 6 rows and the same 64 bytes of columns, as two 32-byte registers per row, with the same
// operations on every element, so both give the same bits. The direct kernels read A's rows in place
// (row-major, 16 rows at stride lda); the packed kernels read element (i, k) at a[k·ks + i]
// (A transposed in place, or a zero-padded copy of an edge block). Both do the same operations
// on every row, so a row's result does not depend on which kernel computed it, nor on the
// other rows.
package main

import (
	"fmt"
	"os"
	"strings"
)

type prec struct {
	name  string // "s" or "d"
	size  int    // bytes per element
	ps    string // instruction suffix: PS or PD
	bcast string // broadcast instruction
}

var b strings.Builder

func p(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

// Frame of the kernels (ABI0): kc+0, a+8, lda+16 (direct) or ks+16 (packed), b+24, c+32,
// ldc+40, mr+48, mask+56, alpha+64, then beta and mode at their alignment for the precision.
func (pr prec) frame() (beta, mode, size int) {
	if pr.size == 4 {
		return 68, 72, 80
	}
	return 72, 80, 88
}

// prologue writes a kernel's header and loads its operands: kc in CX, a in SI, the stride of A
// in bytes in DX and three times it in BX, b in DI. It returns the kernel's name and the frame
// offsets of beta and mode.
func prologue(pr prec, direct bool, suffix string) (fn string, betaOff, modeOff int) {
	kind, stride := "Packed", "ks"
	if direct {
		kind, stride = "Direct", "lda"
	}
	fn = fmt.Sprintf("%sgemm%s%s", pr.name, kind, suffix)
	p("// func %s(kc int, a *%s, %s int, b *%s, c *%s, ldc int, mr int, mask uint64, alpha, beta %s, mode int)", fn, pr.goType(), stride, pr.goType(), pr.goType(), pr.goType())
	betaOff, modeOff, size := pr.frame()
	p("TEXT ·%s(SB), NOSPLIT, $0-%d", fn, size)
	p("\tMOVQ kc+0(FP), CX")
	p("\tMOVQ a+8(FP), SI")
	p("\tMOVQ %s+16(FP), DX", stride)
	p("\tSHLQ $%d, DX", log2(pr.size))
	p("\tLEAQ (DX)(DX*2), BX")
	p("\tMOVQ b+24(FP), DI")
	return fn, betaOff, modeOff
}

func kernel(pr prec, direct bool) {
	fn, betaOff, modeOff := prologue(pr, direct, "")
	if direct {
		// Rows 4, 8 and 12 start 4·lda, 8·lda and 12·lda elements after row 0.
		p("\tLEAQ (SI)(DX*4), R8")
		p("\tLEAQ (R8)(DX*4), R9")
		p("\tLEAQ (R9)(DX*4), R10")
	}
	for i := range 16 {
		p("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
	}
	// Main loop: 4 values of k per pass.
	p("\tMOVQ CX, R11")
	p("\tSHRQ $2, R11")
	p("\tJZ %s_tail", fn)
	p("%s_loop4:", fn)
	for u := range 4 {
		p("\tVMOVU%s %d(DI), Z16", pr.ps, 64*u)
		for i := range 16 {
			p("\tVFMADD231%s.BCST %s, Z16, Z%d", pr.ps, aAddr(pr, direct, i, u), i)
		}
	}
	if direct {
		for _, r := range []string{"SI", "R8", "R9", "R10"} {
			p("\tADDQ $%d, %s", 4*pr.size, r)
		}
	} else {
		p("\tLEAQ (SI)(DX*4), SI")
	}
	p("\tADDQ $256, DI")
	p("\tDECQ R11")
	p("\tJNZ %s_loop4", fn)
	p("%s_tail:", fn)
	p("\tANDQ $3, CX")
	p("\tJZ %s_store", fn)
	p("%s_loop1:", fn)
	p("\tVMOVU%s (DI), Z16", pr.ps)
	for i := range 16 {
		p("\tVFMADD231%s.BCST %s, Z16, Z%d", pr.ps, aAddr(pr, direct, i, 0), i)
	}
	if direct {
		for _, r := range []string{"SI", "R8", "R9", "R10"} {
			p("\tADDQ $%d, %s", pr.size, r)
		}
	} else {
		p("\tADDQ DX, SI")
	}
	p("\tADDQ $64, DI")
	p("\tDECQ CX")
	p("\tJNZ %s_loop1", fn)

	// Store: C[i,:] = α·acc (mode 0, C not read) or α·acc + β·C[i,:] (mode 1), the columns
	// of the mask, rows 0 … mr−1.
	p("%s_store:", fn)
	p("\tMOVQ c+32(FP), DI")
	p("\tMOVQ ldc+40(FP), DX")
	p("\tSHLQ $%d, DX", log2(pr.size))
	p("\tMOVQ mr+48(FP), CX")
	p("\tMOVQ mask+56(FP), AX")
	p("\tKMOVW AX, K1")
	p("\t%s alpha+64(FP), Z17", pr.bcast)
	p("\t%s beta+%d(FP), Z18", pr.bcast, betaOff)
	p("\tMOVQ mode+%d(FP), AX", modeOff)
	p("\tTESTQ AX, AX")
	p("\tJNZ %s_beta", fn)
	for i := range 16 {
		p("\tVMUL%s Z17, Z%d, Z%d", pr.ps, i, i)
		p("\tVMOVU%s Z%d, K1, (DI)", pr.ps, i)
		if i < 15 {
			p("\tDECQ CX")
			p("\tJZ %s_done", fn)
			p("\tADDQ DX, DI")
		}
	}
	p("\tJMP %s_done", fn)
	p("%s_beta:", fn)
	for i := range 16 {
		p("\tVMUL%s Z17, Z%d, Z%d", pr.ps, i, i)
		p("\tVMOVU%s.Z (DI), K1, Z19", pr.ps)
		p("\tVFMADD231%s Z18, Z19, Z%d", pr.ps, i)
		p("\tVMOVU%s Z%d, K1, (DI)", pr.ps, i)
		if i < 15 {
			p("\tDECQ CX")
			p("\tJZ %s_done", fn)
			p("\tADDQ DX, DI")
		}
	}
	p("%s_done:", fn)
	p("\tVZEROUPPER")
	p("\tRET")
	p("")
}

// aAddr is the address of A[i, k+u] relative to the loop's pointers.
func aAddr(pr prec, direct bool, i, u int) string {
	off := u * pr.size
	if direct {
		base := []string{"SI", "R8", "R9", "R10"}[i/4]
		switch i % 4 {
		case 0:
			return fmt.Sprintf("%d(%s)", off, base)
		case 1:
			return fmt.Sprintf("%d(%s)(DX*1)", off, base)
		case 2:
			return fmt.Sprintf("%d(%s)(DX*2)", off, base)
		default:
			return fmt.Sprintf("%d(%s)(BX*1)", off, base)
		}
	}
	// Packed: row k+u starts u·ks after row k; DX = ks in bytes, BX = 3·ks.
	off = i * pr.size
	switch u {
	case 0:
		return fmt.Sprintf("%d(SI)", off)
	case 1:
		return fmt.Sprintf("%d(SI)(DX*1)", off)
	case 2:
		return fmt.Sprintf("%d(SI)(DX*2)", off)
	default:
		return fmt.Sprintf("%d(SI)(BX*1)", off)
	}
}

// kernelAVX2 writes the AVX2 kernel of pr: 6 rows × 64 bytes, accumulators Y0–Y11 (row r in
// Y2r and Y2r+1), B in Y12 and Y13, A's broadcast in Y14; the columns of the mask (its low
// popcount bits) stored through VMASKMOV with lane masks read from avx2Mask<>.
func kernelAVX2(pr prec, direct bool) {
	fn, betaOff, modeOff := prologue(pr, direct, "AVX2")
	if direct {
		p("\tLEAQ (SI)(BX*1), R8") // row 3
	}
	for i := range 12 {
		p("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	// A[i, k+u] for the 6 rows.
	addr := func(i, u int) string {
		if direct {
			base := []string{"SI", "R8"}[i/3]
			off := u * pr.size
			switch i % 3 {
			case 0:
				return fmt.Sprintf("%d(%s)", off, base)
			case 1:
				return fmt.Sprintf("%d(%s)(DX*1)", off, base)
			default:
				return fmt.Sprintf("%d(%s)(DX*2)", off, base)
			}
		}
		off := i * pr.size
		switch u {
		case 0:
			return fmt.Sprintf("%d(SI)", off)
		case 1:
			return fmt.Sprintf("%d(SI)(DX*1)", off)
		case 2:
			return fmt.Sprintf("%d(SI)(DX*2)", off)
		default:
			return fmt.Sprintf("%d(SI)(BX*1)", off)
		}
	}
	step := func(u int) {
		p("\tVMOVUPS %d(DI), Y12", 64*u)
		p("\tVMOVUPS %d(DI), Y13", 64*u+32)
		for i := range 6 {
			p("\t%s %s, Y14", pr.bcast, addr(i, u))
			p("\tVFMADD231%s Y12, Y14, Y%d", pr.ps, 2*i)
			p("\tVFMADD231%s Y13, Y14, Y%d", pr.ps, 2*i+1)
		}
	}
	p("\tMOVQ CX, R11")
	p("\tSHRQ $2, R11")
	p("\tJZ %s_tail", fn)
	p("%s_loop4:", fn)
	for u := range 4 {
		step(u)
	}
	if direct {
		p("\tADDQ $%d, SI", 4*pr.size)
		p("\tADDQ $%d, R8", 4*pr.size)
	} else {
		p("\tLEAQ (SI)(DX*4), SI")
	}
	p("\tADDQ $256, DI")
	p("\tDECQ R11")
	p("\tJNZ %s_loop4", fn)
	p("%s_tail:", fn)
	p("\tANDQ $3, CX")
	p("\tJZ %s_store", fn)
	p("%s_loop1:", fn)
	step(0)
	if direct {
		p("\tADDQ $%d, SI", pr.size)
		p("\tADDQ $%d, R8", pr.size)
	} else {
		p("\tADDQ DX, SI")
	}
	p("\tADDQ $64, DI")
	p("\tDECQ CX")
	p("\tJNZ %s_loop1", fn)

	// Lane masks: lanes holds the mask's column count (popcount); the 64-byte row of masks
	// starting (lanes per row − lanes) lanes into avx2Mask<> has lanes all-ones lanes first.
	p("%s_store:", fn)
	lanes := 64 / pr.size
	p("\tMOVQ mask+56(FP), AX")
	p("\tPOPCNTQ AX, AX")
	p("\tMOVQ $%d, CX", lanes)
	p("\tSUBQ AX, CX")
	p("\tSHLQ $%d, CX", log2(pr.size))
	p("\tLEAQ avx2Mask<>(SB), AX")
	p("\tVMOVDQU (AX)(CX*1), Y12")
	p("\tVMOVDQU 32(AX)(CX*1), Y13")
	p("\tMOVQ c+32(FP), DI")
	p("\tMOVQ ldc+40(FP), DX")
	p("\tSHLQ $%d, DX", log2(pr.size))
	p("\tMOVQ mr+48(FP), CX")
	p("\t%s alpha+64(FP), Y14", pr.bcast)
	p("\t%s beta+%d(FP), Y15", pr.bcast, betaOff)
	p("\tMOVQ mode+%d(FP), AX", modeOff)
	p("\tTESTQ AX, AX")
	p("\tJNZ %s_beta", fn)
	for i := range 6 {
		for h := range 2 {
			r := 2*i + h
			p("\tVMUL%s Y14, Y%d, Y%d", pr.ps, r, r)
			p("\tVMASKMOV%s Y%d, Y%d, %d(DI)", pr.ps, r, 12+h, 32*h)
		}
		if i < 5 {
			p("\tDECQ CX")
			p("\tJZ %s_done", fn)
			p("\tADDQ DX, DI")
		}
	}
	p("\tJMP %s_done", fn)
	p("%s_beta:", fn)
	// α·s for every row first, freeing Y14 (α) to hold C's loaded half; then β·C added by one
	// fused multiply-add, as the AVX-512 kernels do.
	for r := range 12 {
		p("\tVMUL%s Y14, Y%d, Y%d", pr.ps, r, r)
	}
	for i := range 6 {
		for h := range 2 {
			r := 2*i + h
			p("\tVMASKMOV%s %d(DI), Y%d, Y14", pr.ps, 32*h, 12+h)
			p("\tVFMADD231%s Y15, Y14, Y%d", pr.ps, r)
			p("\tVMASKMOV%s Y%d, Y%d, %d(DI)", pr.ps, r, 12+h, 32*h)
		}
		if i < 5 {
			p("\tDECQ CX")
			p("\tJZ %s_done", fn)
			p("\tADDQ DX, DI")
		}
	}
	p("%s_done:", fn)
	p("\tVZEROUPPER")
	p("\tRET")
	p("")
}

func (pr prec) goType() string {
	if pr.size == 4 {
		return "float32"
	}
	return "float64"
}

func log2(n int) int {
	if n == 4 {
		return 2
	}
	return 3
}

func main() {
	p("// Code generated by asmgen/main.go; DO NOT EDIT.")
	p("")
	p("//go:build !noasm && !purego")
	p("")
	p("#include \"textflag.h\"")
	p("")
	p("// The AVX2 kernels' lane masks: 64 bytes of ones, then 64 of zeros.")
	for off := 0; off < 128; off += 8 {
		v := "$0xffffffffffffffff"
		if off >= 64 {
			v = "$0"
		}
		p("DATA avx2Mask<>+%d(SB)/8, %s", off, v)
	}
	p("GLOBL avx2Mask<>(SB), RODATA|NOPTR, $128")
	p("")
	for _, pr := range []prec{
		{name: "s", size: 4, ps: "PS", bcast: "VBROADCASTSS"},
		{name: "d", size: 8, ps: "PD", bcast: "VBROADCASTSD"},
	} {
		kernel(pr, true)
		kernel(pr, false)
		kernelAVX2(pr, true)
		kernelAVX2(pr, false)
	}
	os.Stdout.WriteString(b.String())
}
