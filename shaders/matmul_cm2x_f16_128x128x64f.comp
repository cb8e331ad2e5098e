#version 450
// the F16 cm2 kernel at 128x128, 64 deep, interior tiles on the unclamped fast path: the default
// (CM2_FAST; BenchmarkCM2Tiles; VKLLM_GPU_CM2_TILE=128x128x64f)
#define T_F16
#define CM2_XH
#define CM2_FAST
#define CM2_BM 128
#define CM2_BN 128
#define CM2_BK 64

#include "matmul_cm2.glsl"
