package library

import (
	"github.com/vkllm/vkllm/engine/gguf"
)

// fileTypes are llama.cpp's names for general.file_type (enum llama_ftype), the "Q4_K_M" a
// user sees in file names.
var fileTypes = map[uint64]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
	22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
	28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
	38: "MXFP4_MOE",
}

// quantOf names the model's quantization: general.file_type as llama.cpp names it, else the
// tensor type of the most bytes among the matrices (tensors of two or more dimensions).
func quantOf(f *gguf.File) string {
	if ft, ok := f.Uint("general.file_type"); ok {
		if name, ok := fileTypes[ft]; ok {
			return name
		}
	}
	bytes := map[string]int64{}
	best, bestN := "", int64(-1)
	for _, t := range f.Tensors {
		if len(t.Dims) < 2 {
			continue
		}
		name := t.Type.String()
		bytes[name] += t.Size
		if n := bytes[name]; n > bestN || (n == bestN && name < best) {
			best, bestN = name, n
		}
	}
	return best
}
