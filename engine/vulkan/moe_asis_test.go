package vulkan

import (
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// A prompt window's experts take their activations unrounded exactly where the window's dense
// products of their type do (the cm2 F16 kernel packs them to fp16 as they are): on a device
// with the cooperative matrix 2 kernels and the fp16 staging (or VKLLM_GPU_CM2 for the types it
// decodes), never for a decode step, on the KHR tiles alone, the shared-memory tier or the
// exact tier's Q8_0, so that no window mixes the two arithmetics (expertsAsIs says why).
func TestExpertsTakeActivationsAsTheWindowsDenseProductsDo(t *testing.T) {
	cm2Staging := func() *Resident {
		return &Resident{c: &Context{gemm: gemmCoopmat, cm2Able: true, cm2Stage: true}, stage: &Buffer{Size: 1 << 20}}
	}
	for _, tc := range []struct {
		name string
		r    *Resident
		t    quant.Type
		k, m int
		want bool
	}{
		{"cm2 staging, MXFP4 window", cm2Staging(), quant.MXFP4, 256, 7, true},
		{"cm2 staging, IQ2_XXS window", cm2Staging(), quant.IQ2_XXS, 2048, 512, true},
		{"cm2 staging, Q4_K window", cm2Staging(), quant.Q4_K, 2048, 512, true},
		{"cm2 staging, decode step", cm2Staging(), quant.MXFP4, 256, 1, false},
		{"cm2 staging, rows not whole cm2 K steps", cm2Staging(), quant.IQ4_NL, 48, 7, false},
		{"cm2 staging, F32 experts (shared-memory tier)", cm2Staging(), quant.F32, 256, 7, false},
		{"cm2 without the staging buffer", &Resident{c: &Context{gemm: gemmCoopmat, cm2Able: true, cm2Stage: true}}, quant.MXFP4, 256, 7, false},
		{"cm2 staging off", &Resident{c: &Context{gemm: gemmCoopmat, cm2Able: true}}, quant.MXFP4, 256, 7, false},
		{"VKLLM_GPU_CM2=1 decodes Q4_K itself", &Resident{c: &Context{gemm: gemmCoopmat, cm2Able: true, cm2All: true}}, quant.Q4_K, 2048, 512, true},
		{"VKLLM_GPU_CM2=1 does not take MXFP4", &Resident{c: &Context{gemm: gemmCoopmat, cm2Able: true, cm2All: true}}, quant.MXFP4, 256, 7, false},
		{"KHR tiles alone", &Resident{c: &Context{gemm: gemmCoopmat}}, quant.MXFP4, 256, 7, false},
		{"shared-memory tier (lavapipe)", &Resident{c: &Context{gemm: gemmShared}}, quant.MXFP4, 256, 7, false},
		{"exact tier, Q8_0", &Resident{c: &Context{gemm: gemmCoopmat, cm2Able: true, cm2Stage: true, exact: true}, stage: &Buffer{Size: 1 << 20}}, quant.Q8_0, 256, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.expertsAsIs(tc.t, tc.k, tc.m); got != tc.want {
				t.Errorf("expertsAsIs(%v, k %d, m %d) = %v, want %v", tc.t, tc.k, tc.m, got, tc.want)
			}
			dense := tc.m > 1 && tc.r.takesCM2(weight{typ: tc.t}, tc.k, tc.m)
			if tc.want && !dense {
				t.Errorf("the experts take %v activations unrounded where a dense product of the type rounds them", tc.t)
			}
		})
	}
}
