#version 450
// the F16 cm2 kernel at 64x128, 64 deep: the default before 128x128x64f (VKLLM_GPU_CM2_TILE=64x128x64)
#define T_F16
#define CM2_XH
#define CM2_BM 64
#define CM2_BN 128
#define CM2_BK 64

#include "matmul_cm2.glsl"
