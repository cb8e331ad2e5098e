package quant

import (
	"fmt"
	"strings"
)

const maxInt = int(^uint(0) >> 1)

// Type is a GGML tensor type id, as stored in GGUF tensor infos.
type Type uint32

// The GGML type ids. The values are fixed by the GGUF format.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15

	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	IQ1_M   Type = 29
	BF16    Type = 30
	MXFP4   Type = 39
)

// QK is the block size of the simple quants; QKK the super-block size of the K-quants.
const (
	QK  = 32
	QKK = 256
)

type typeInfo struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block
}

// types is indexed by Type; unknown ids have a zero entry (blockSize 0).
var types = [...]typeInfo{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", QK, 2 + QK/2},
	Q4_1: {"Q4_1", QK, 4 + QK/2},
	Q5_0: {"Q5_0", QK, 2 + 4 + QK/2},
	Q5_1: {"Q5_1", QK, 4 + 4 + QK/2},
	Q8_0: {"Q8_0", QK, 2 + QK},
	Q8_1: {"Q8_1", QK, 4 + QK},
	Q2_K: {"Q2_K", QKK, QKK/16 + QKK/4 + 4},         // scales, qs, d, dmin
	Q3_K: {"Q3_K", QKK, QKK/8 + QKK/4 + 12 + 2},     // hmask, qs, scales, d
	Q4_K: {"Q4_K", QKK, 4 + 12 + QKK/2},             // d, dmin, scales, qs
	Q5_K: {"Q5_K", QKK, 4 + 12 + QKK/8 + QKK/2},     // d, dmin, scales, qh, qs
	Q6_K: {"Q6_K", QKK, QKK/2 + QKK/4 + QKK/16 + 2}, // ql, qh, scales, d
	Q8_K: {"Q8_K", QKK, 4 + QKK + QKK/16*2},         // d (f32), qs, bsums (int16)

	IQ2_XXS: {"IQ2_XXS", QKK, 2 + QKK/4},             // d, 32 uint16
	IQ2_XS:  {"IQ2_XS", QKK, 2 + QKK/4 + QKK/32},     // d, 32 uint16, scales
	IQ2_S:   {"IQ2_S", QKK, 2 + QKK/4 + QKK/16},      // d, qs and signs, qh, scales
	IQ3_XXS: {"IQ3_XXS", QKK, 2 + 3*QKK/8},           // d, indices, signs and scales
	IQ3_S:   {"IQ3_S", QKK, 2 + 13*QKK/32 + QKK/64},  // d, qs, qh, signs, scales
	IQ1_S:   {"IQ1_S", QKK, 2 + QKK/8 + QKK/16},      // d, qs, uint16 qh
	IQ1_M:   {"IQ1_M", QKK, QKK/8 + QKK/16 + QKK/32}, // qs, qh, scales (d inside)
	IQ4_NL:  {"IQ4_NL", QK, 2 + QK/2},                // d, nibbles
	IQ4_XS:  {"IQ4_XS", QKK, 2 + 2 + QKK/64 + QKK/2}, // d, scales_h, scales_l, nibbles
	MXFP4:   {"MXFP4", QK, 1 + QK/2},                 // E8M0 exponent, nibbles
}

func (t Type) info() (typeInfo, bool) {
	if uint64(t) >= uint64(len(types)) || types[t].blockSize == 0 {
		return typeInfo{}, false
	}
	return types[t], true
}

// String returns the GGML name of the type ("Q4_K"), or "type(N)" for an unknown id.
func (t Type) String() string {
	if ti, ok := t.info(); ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Valid reports whether t is a type this package knows the layout of.
func (t Type) Valid() bool {
	_, ok := t.info()
	return ok
}

// BlockSize returns the number of elements per block (1 for F32/F16/BF16), or 0 for an unknown type.
func (t Type) BlockSize() int {
	ti, _ := t.info()
	return ti.blockSize
}

// BlockBytes returns the number of bytes per block, or 0 for an unknown type.
func (t Type) BlockBytes() int {
	ti, _ := t.info()
	return ti.blockBytes
}

// RowBytes returns the size in bytes of a row of n elements.
// n must be a non-negative multiple of the block size.
func (t Type) RowBytes(n int) (int, error) {
	ti, ok := t.info()
	if !ok {
		return 0, fmt.Errorf("row bytes of %v: unknown tensor type", t)
	}
	if n < 0 {
		return 0, fmt.Errorf("row bytes of %v: negative element count %d", t, n)
	}
	if n/ti.blockSize > maxInt/ti.blockBytes {
		return 0, fmt.Errorf("row bytes of %v: %d elements overflow the address space", t, n)
	}
	if n%ti.blockSize != 0 {
		return 0, fmt.Errorf("row bytes of %v: %d elements is not a multiple of the block size %d", t, n, ti.blockSize)
	}
	return n / ti.blockSize * ti.blockBytes, nil
}

// ParseType returns the type named s ("Q4_K", case-sensitive GGML spelling).
func ParseType(s string) (Type, error) {
	for t, ti := range types {
		if ti.blockSize != 0 && ti.name == s {
			return Type(t), nil
		}
	}
	return 0, fmt.Errorf("parse tensor type %q: unknown name (want one of %s)", s, SupportedNames())
}

// SupportedNames lists the types this package dequantizes and multiplies, in id order
// ("F32, F16, Q4_0, …"), for error messages.
func SupportedNames() string {
	var b strings.Builder
	for t, ti := range types {
		if ti.blockSize == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Type(t).String())
	}
	return b.String()
}
