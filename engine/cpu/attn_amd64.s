//go:build amd64 && !purego

#include "textflag.h"

// func dotF16AVX2(q *float32, k *uint16, n int) float64
// Σ q[i]*k[i] over n (a multiple of 8) f16-rounded queries and f16 keys. The products are
// exact in float32; they are summed in double precision in two four-lane accumulators.
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), SI
	MOVQ k+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	SHRQ $3, CX
	JZ dotdone
dotloop:
	VCVTPH2PS (DI), Y2
	VMULPS (SI), Y2, Y2
	VCVTPS2PD X2, Y3
	VEXTRACTF128 $1, Y2, X2
	VCVTPS2PD X2, Y4
	VADDPD Y3, Y0, Y0
	VADDPD Y4, Y1, Y1
	ADDQ $32, SI
	ADDQ $16, DI
	DECQ CX
	JNZ dotloop
dotdone:
	VADDPD Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD X1, X0, X0
	VUNPCKHPD X0, X0, X1
	VADDSD X1, X0, X0
	VZEROUPPER
	MOVSD X0, ret+24(FP)
	RET

// func madF16AVX2(acc, v *uint16, s float32, n int)
// acc[i] = f16(fma(v[i], s, acc[i])) for n (a multiple of 8) f16 values, rounding to nearest even.
TEXT ·madF16AVX2(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), SI
	MOVQ v+8(FP), DI
	VBROADCASTSS s+16(FP), Y5
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ maddone
madloop:
	VCVTPH2PS (DI), Y1
	VCVTPH2PS (SI), Y2
	VFMADD231PS Y5, Y1, Y2
	VCVTPS2PH $0, Y2, (SI)
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ madloop
maddone:
	VZEROUPPER
	RET

// func scaleF16AVX2(acc *uint16, s float32, n int)
// acc[i] = f16(acc[i] * s) for n (a multiple of 8) f16 values.
TEXT ·scaleF16AVX2(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), SI
	VBROADCASTSS s+8(FP), Y5
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ scaledone
scaleloop:
	VCVTPH2PS (SI), Y2
	VMULPS Y5, Y2, Y2
	VCVTPS2PH $0, Y2, (SI)
	ADDQ $16, SI
	DECQ CX
	JNZ scaleloop
scaledone:
	VZEROUPPER
	RET

// Rounds the 8 floats of Y to float16 and back (nearest even), with X as the halves.
#define ROUND16(Y, X) \
	VCVTPS2PH $0, Y, X \
	VCVTPH2PS X, Y

// One 8-value group: acc = f16(acc*ms).
#define SCALESEQ(ACC, XACC) \
	VMULPS Y8, ACC, ACC \
	ROUND16(ACC, XACC)

// One 8-value group: acc = f16(fma(v, vs, acc)), v at off(DI).
#define MADSEQ(ACC, XACC, off) \
	VCVTPH2PS off(DI), Y10 \
	VFMADD231PS Y9, Y10, ACC \
	ROUND16(ACC, XACC)

// func madF16Seq64(out *float32, v *uint16, vStride int, ms, vs *float32, npos int)
// The f16 value accumulation of one attention head over 64 value dimensions, held in
// registers across all npos positions: for t in order, acc = f16(acc*ms[t]) and then
// acc = f16(fma(v_t, vs[t], acc)), v_t = v + t*vStride (in uint16s). out gets the final acc
// (f16 values as float32). A scale of 1 leaves an f16 value unchanged.
TEXT ·madF16Seq64(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DX
	MOVQ v+8(FP), DI
	MOVQ vStride+16(FP), R8
	SHLQ $1, R8
	MOVQ ms+24(FP), SI
	MOVQ vs+32(FP), BX
	MOVQ npos+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVL $0x3f800000, AX // 1.0
	VMOVD AX, X11
	TESTQ CX, CX
	JZ seqdone
seqloop:
	// most positions do not raise the maximum: their scale is exactly 1, a no-op to skip
	VMOVSS (SI), X8
	VUCOMISS X11, X8
	JNE seqscale
	JPS seqscale
	JMP seqmad
seqscale:
	VBROADCASTSS (SI), Y8
	SCALESEQ(Y0, X0)
	SCALESEQ(Y1, X1)
	SCALESEQ(Y2, X2)
	SCALESEQ(Y3, X3)
	SCALESEQ(Y4, X4)
	SCALESEQ(Y5, X5)
	SCALESEQ(Y6, X6)
	SCALESEQ(Y7, X7)
seqmad:
	VBROADCASTSS (BX), Y9
	MADSEQ(Y0, X0, 0)
	MADSEQ(Y1, X1, 16)
	MADSEQ(Y2, X2, 32)
	MADSEQ(Y3, X3, 48)
	MADSEQ(Y4, X4, 64)
	MADSEQ(Y5, X5, 80)
	MADSEQ(Y6, X6, 96)
	MADSEQ(Y7, X7, 112)
	ADDQ $4, SI
	ADDQ $4, BX
	ADDQ R8, DI
	DECQ CX
	JNZ seqloop
seqdone:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET

// func dotF16RowsAVX2(q *float32, k *uint16, kStride, n, npos int, scale float32, out *float32)
// out[t] = float32(Σ q[i]*k_t[i]) * scale for t < npos, k_t = k + t*kStride (in uint16s),
// each sum as dotF16AVX2 takes it (n a multiple of 8).
TEXT ·dotF16RowsAVX2(SB), NOSPLIT, $0-56
	MOVQ k+8(FP), DI
	MOVQ kStride+16(FP), R8
	SHLQ $1, R8
	MOVQ n+24(FP), R9
	SHRQ $3, R9
	MOVQ npos+32(FP), R10
	VMOVSS scale+40(FP), X7
	MOVQ out+48(FP), DX
	TESTQ R10, R10
	JZ rowsdone
	TESTQ R9, R9
	JZ rowsdone
rowsloop:
	MOVQ q+0(FP), SI
	MOVQ DI, R11
	MOVQ R9, CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
rowsdot:
	VCVTPH2PS (R11), Y2
	VMULPS (SI), Y2, Y2
	VCVTPS2PD X2, Y3
	VEXTRACTF128 $1, Y2, X2
	VCVTPS2PD X2, Y4
	VADDPD Y3, Y0, Y0
	VADDPD Y4, Y1, Y1
	ADDQ $32, SI
	ADDQ $16, R11
	DECQ CX
	JNZ rowsdot
	VADDPD Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD X1, X0, X0
	VUNPCKHPD X0, X0, X1
	VADDSD X1, X0, X0
	VCVTSD2SS X0, X0, X0
	VMULSS X7, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, DX
	ADDQ R8, DI
	DECQ R10
	JNZ rowsloop
rowsdone:
	VZEROUPPER
	RET
