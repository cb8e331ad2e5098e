#version 450
// a tile candidate of the F16 cm2 kernel (BenchmarkCM2Tiles, VKLLM_GPU_CM2_TILE=64x128x64_in): 64x128, 64 deep, interior tiles unclamped
#define T_F16
#define CM2_XH
#define CM2_BM 64
#define CM2_BN 128
#define CM2_BK 64
#define CM2_INTERIOR
#include "matmul_cm2.glsl"
