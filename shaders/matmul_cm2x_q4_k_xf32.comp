#version 450
// A candidate for BenchmarkCM2Tiles (coopmat_test.go), not used by the engine: fp32 activations decoded to fp16 in the load.
#define T_Q4_K
#include "matmul_cm2.glsl"
