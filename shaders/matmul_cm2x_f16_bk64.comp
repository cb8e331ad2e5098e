#version 450
// a benchmark candidate (BenchmarkCM2Tiles) and VKLLM_GPU_CM2_BK=64: the F16 cm2 kernel at 64x128, 64 deep
#define T_F16
#define CM2_XH
#define CM2_BM 64
#define CM2_BN 128
#define CM2_BK 64
#include "matmul_cm2.glsl"
