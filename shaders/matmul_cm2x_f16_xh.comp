#version 450
// A candidate for BenchmarkCM2Tiles (coopmat_test.go), not used by the engine.
#define T_F16
#define CM2_XH
#include "matmul_cm2.glsl"
