//go:build amd64 && !purego

#include "textflag.h"

DATA nibmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibmask<>(SB), RODATA|NOPTR, $32

DATA eights<>+0(SB)/8, $0x0808080808080808
DATA eights<>+8(SB)/8, $0x0808080808080808
DATA eights<>+16(SB)/8, $0x0808080808080808
DATA eights<>+24(SB)/8, $0x0808080808080808
GLOBL eights<>(SB), RODATA|NOPTR, $32

// Signed int8 x int8 products of Y4 (weights) and Y5 (activations), summed in fours into the
// eight int32 lanes of Y6. Y7 holds int16 ones.
#define I8DOT \
	VPSIGNB Y4, Y4, Y6 \
	VPSIGNB Y4, Y5, Y5 \
	VPMADDUBSW Y5, Y6, Y6 \
	VPMADDWD Y7, Y6, Y6

// The weight loops prefetch the weights 4 KiB ahead: a matmul streams each weight row from
// memory exactly once, and the hardware prefetcher alone leaves a single core at about half
// the bandwidth it can draw (measured 6 vs 14 GB/s on a Xeon with AVX-512).

// func dotQ8_0AVX2(w, x *byte, nb int) float32
// acc(8 lanes) += (dw*dx) * lanesums, one accumulator; then (l+l4) folded as (0+2)+(1+3).
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	VPCMPEQW Y7, Y7, Y7
	VPSRLW $15, Y7, Y7
q8loop:
	PREFETCHT0 4096(SI)
	VPBROADCASTW (SI), X1
	VPBROADCASTW (DI), X2
	VCVTPH2PS X1, Y1
	VCVTPH2PS X2, Y2
	VMULPS Y2, Y1, Y3
	VMOVDQU 2(SI), Y4
	VMOVDQU 2(DI), Y5
	I8DOT
	VCVTDQ2PS Y6, Y6
	VFMADD231PS Y6, Y3, Y0
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ q8loop
	VEXTRACTF128 $1, Y0, X1
	VADDPS X0, X1, X0
	VMOVHLPS X0, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotQ4_0AVX2(w, x *byte, nb int) float32
// acc = fma(float(int block sum), dw*dx, acc), one scalar running sum.
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS X0, X0, X0
	VPCMPEQW Y7, Y7, Y7
	VPSRLW $15, Y7, Y7
	VMOVDQU nibmask<>(SB), Y9
	VMOVDQU eights<>(SB), Y10
q4loop:
	PREFETCHT0 4096(SI)
	VPBROADCASTW (SI), X1
	VPBROADCASTW (DI), X2
	VCVTPH2PS X1, X1
	VCVTPH2PS X2, X2
	VMULSS X2, X1, X3
	VMOVDQU 2(SI), X4
	VPSRLW $4, X4, X5
	VINSERTI128 $1, X5, Y4, Y4
	VPAND Y9, Y4, Y4
	VPSUBB Y10, Y4, Y4
	VMOVDQU 2(DI), Y5
	I8DOT
	VEXTRACTI128 $1, Y6, X8
	VPADDD X8, X6, X6
	VPSHUFD $0x4e, X6, X8
	VPADDD X8, X6, X6
	VPSHUFD $0xb1, X6, X8
	VPADDD X8, X6, X6
	VCVTDQ2PS X6, X6
	VFMADD231SS X3, X6, X0
	ADDQ $18, SI
	ADDQ $34, DI
	DECQ CX
	JNZ q4loop
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// Horizontal sum of the 8 floats of Y(acc) in llama.cpp's order into the float at off(DX).
#define HSUM8(ACC, XACC, off) \
	VEXTRACTF128 $1, ACC, X1 \
	VADDPS XACC, X1, X1 \
	VMOVHLPS X1, X1, X2 \
	VADDPS X2, X1, X1 \
	VMOVSHDUP X1, X2 \
	VADDSS X2, X1, X1 \
	VMOVSS X1, off(DX)

// One activation block at (XP) against the weight block already in Y4 (signs) / Y5 (|w|) and
// its scale in Y6: ACC += (dw*dx) * lane sums.
#define Q8X(XP, ACC) \
	VPBROADCASTW (XP), X8 \
	VCVTPH2PS X8, Y8 \
	VMULPS Y8, Y6, Y8 \
	VMOVDQU 2(XP), Y9 \
	VPSIGNB Y4, Y9, Y9 \
	VPMADDUBSW Y9, Y5, Y9 \
	VPMADDWD Y15, Y9, Y9 \
	VCVTDQ2PS Y9, Y9 \
	VFMADD231PS Y9, Y8, ACC

// func dotQ8_0AVX2x4(w, x0, x1, x2, x3 *byte, nb int, out *[4]float32)
// Four dotQ8_0AVX2 results sharing each weight block load; each output keeps its own order.
TEXT ·dotQ8_0AVX2x4(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DI
	MOVQ x1+16(FP), R8
	MOVQ x2+24(FP), R9
	MOVQ x3+32(FP), R10
	MOVQ nb+40(FP), CX
	MOVQ out+48(FP), DX
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
q8x4loop:
	PREFETCHT0 4096(SI)
	VPBROADCASTW (SI), X6
	VCVTPH2PS X6, Y6
	VMOVDQU 2(SI), Y4
	VPSIGNB Y4, Y4, Y5
	Q8X(DI, Y10)
	Q8X(R8, Y11)
	Q8X(R9, Y12)
	Q8X(R10, Y13)
	ADDQ $34, SI
	ADDQ $34, DI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $34, R10
	DECQ CX
	JNZ q8x4loop
	HSUM8(Y10, X10, 0)
	HSUM8(Y11, X11, 4)
	HSUM8(Y12, X12, 8)
	HSUM8(Y13, X13, 12)
	VZEROUPPER
	RET

// One activation block at (XP) against the unpacked Q4_0 weights in Y4 and the weight scale in
// X6: ACC(scalar) = fma(float(int block sum), dw*dx, ACC).
#define Q4X(XP, ACC) \
	VPBROADCASTW (XP), X8 \
	VCVTPH2PS X8, X8 \
	VMULSS X8, X6, X8 \
	VMOVDQU 2(XP), Y9 \
	VPSIGNB Y4, Y9, Y9 \
	VPMADDUBSW Y9, Y5, Y9 \
	VPMADDWD Y15, Y9, Y9 \
	VEXTRACTI128 $1, Y9, X3 \
	VPADDD X3, X9, X9 \
	VPSHUFD $0x4e, X9, X3 \
	VPADDD X3, X9, X9 \
	VPSHUFD $0xb1, X9, X3 \
	VPADDD X3, X9, X9 \
	VCVTDQ2PS X9, X9 \
	VFMADD231SS X8, X9, ACC

// func dotQ4_0AVX2x4(w, x0, x1, x2, x3 *byte, nb int, out *[4]float32)
TEXT ·dotQ4_0AVX2x4(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DI
	MOVQ x1+16(FP), R8
	MOVQ x2+24(FP), R9
	MOVQ x3+32(FP), R10
	MOVQ nb+40(FP), CX
	MOVQ out+48(FP), DX
	VXORPS X10, X10, X10
	VXORPS X11, X11, X11
	VXORPS X12, X12, X12
	VXORPS X13, X13, X13
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	VMOVDQU nibmask<>(SB), Y14
	VMOVDQU eights<>(SB), Y7
q4x4loop:
	PREFETCHT0 4096(SI)
	VPBROADCASTW (SI), X6
	VCVTPH2PS X6, X6
	VMOVDQU 2(SI), X4
	VPSRLW $4, X4, X5
	VINSERTI128 $1, X5, Y4, Y4
	VPAND Y14, Y4, Y4
	VPSUBB Y7, Y4, Y4
	VPSIGNB Y4, Y4, Y5
	Q4X(DI, X10)
	Q4X(R8, X11)
	Q4X(R9, X12)
	Q4X(R10, X13)
	ADDQ $18, SI
	ADDQ $34, DI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $34, R10
	DECQ CX
	JNZ q4x4loop
	VMOVSS X10, 0(DX)
	VMOVSS X11, 4(DX)
	VMOVSS X12, 8(DX)
	VMOVSS X13, 12(DX)
	VZEROUPPER
	RET

DATA signbits<>+0(SB)/8, $0x8080808080808080
DATA signbits<>+8(SB)/8, $0x8080808080808080
DATA signbits<>+16(SB)/8, $0x8080808080808080
DATA signbits<>+24(SB)/8, $0x8080808080808080
GLOBL signbits<>(SB), RODATA|NOPTR, $32

// One activation block in the VNNI layout at (XP) (the 32 int8 values twice, the 8 int32
// corrections -128*(sum of each four) twice, the float32 scale) against the weight block in Y5
// (w+128, unsigned) and its scale in Y6: the same lane sums as Q8X, then
// ACC += (dw*dx) * lane sums.
#define Q8V(XP, ACC) \
	VBROADCASTSS 128(XP), Y8 \
	VMULPS Y8, Y6, Y8 \
	VMOVDQU 64(XP), Y9 \
	VPDPBUSD (XP), Y5, Y9 \
	VCVTDQ2PS Y9, Y9 \
	VFMADD231PS Y9, Y8, ACC

// func dotQ8_0VNNIx4(w, x0, x1, x2, x3 *byte, nb int, out *[4]float32)
// dotQ8_0AVX2x4 with AVX-512 VNNI integer dots, bit-identical to it: the lane sums are exact
// integers either way.
TEXT ·dotQ8_0VNNIx4(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DI
	MOVQ x1+16(FP), R8
	MOVQ x2+24(FP), R9
	MOVQ x3+32(FP), R10
	MOVQ nb+40(FP), CX
	MOVQ out+48(FP), DX
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VMOVDQU signbits<>(SB), Y14
q8vx4loop:
	PREFETCHT0 4096(SI)
	VPBROADCASTW (SI), X6
	VCVTPH2PS X6, Y6
	VMOVDQU 2(SI), Y4
	VPXOR Y14, Y4, Y5
	Q8V(DI, Y10)
	Q8V(R8, Y11)
	Q8V(R9, Y12)
	Q8V(R10, Y13)
	ADDQ $34, SI
	ADDQ $192, DI
	ADDQ $192, R8
	ADDQ $192, R9
	ADDQ $192, R10
	DECQ CX
	JNZ q8vx4loop
	HSUM8(Y10, X10, 0)
	HSUM8(Y11, X11, 4)
	HSUM8(Y12, X12, 8)
	HSUM8(Y13, X13, 12)
	VZEROUPPER
	RET

// Q8V on 512-bit registers: the low half of each register holds weight row 0, the high half
// row 1 (Z5: w+128 of both rows, Z6: both scales); the activation block is in both halves.
#define Q8Z(XP, ACC) \
	VBROADCASTSS 128(XP), Z8 \
	VMULPS Z8, Z6, Z8 \
	VMOVDQU32 64(XP), Z9 \
	VPDPBUSD (XP), Z5, Z9 \
	VCVTDQ2PS Z9, Z9 \
	VFMADD231PS Z9, Z8, ACC

// Both 8-lane halves of ZACC (low half YACC) summed in llama.cpp's order into off(DX) and
// off+16(DX).
#define HSUM2X8(ZACC, YACC, XACC, off) \
	VEXTRACTF64X4 $1, ZACC, Y3 \
	HSUM8(YACC, XACC, off) \
	HSUM8(Y3, X3, off+16)

// func dotQ8_0VNNI2xN(w0, w1 *byte, x **byte, groups, nb int, out *float32)
// For each group g of four activation rows x[4g..4g+3]: out[8g+j] = row w0 · x[4g+j] and
// out[8g+4+j] = row w1 · x[4g+j], each bit-identical to dotQ8_0AVX2. Two weight rows share
// every instruction, and the weight rows stay in L1 across the groups.
TEXT ·dotQ8_0VNNI2xN(SB), NOSPLIT, $0-48
	MOVQ x+16(FP), AX
	MOVQ groups+24(FP), R11
	MOVQ out+40(FP), DX
	VBROADCASTI64X4 signbits<>(SB), Z14
q8zgroup:
	MOVQ w0+0(FP), SI
	MOVQ w1+8(FP), BX
	MOVQ 0(AX), DI
	MOVQ 8(AX), R8
	MOVQ 16(AX), R9
	MOVQ 24(AX), R10
	MOVQ nb+32(FP), CX
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
q8zloop:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4096(BX)
	VPBROADCASTW (SI), X6
	VCVTPH2PS X6, Y6
	VPBROADCASTW (BX), X7
	VCVTPH2PS X7, Y7
	VINSERTF64X4 $1, Y7, Z6, Z6
	VMOVDQU 2(SI), Y5
	VINSERTI64X4 $1, 2(BX), Z5, Z5
	VPXORD Z14, Z5, Z5
	Q8Z(DI, Z10)
	Q8Z(R8, Z11)
	Q8Z(R9, Z12)
	Q8Z(R10, Z13)
	ADDQ $34, SI
	ADDQ $34, BX
	ADDQ $192, DI
	ADDQ $192, R8
	ADDQ $192, R9
	ADDQ $192, R10
	DECQ CX
	JNZ q8zloop
	HSUM2X8(Z10, Y10, X10, 0)
	HSUM2X8(Z11, Y11, X11, 4)
	HSUM2X8(Z12, Y12, X12, 8)
	HSUM2X8(Z13, Y13, X13, 12)
	ADDQ $32, AX
	ADDQ $32, DX
	DECQ R11
	JNZ q8zgroup
	VZEROUPPER
	RET
