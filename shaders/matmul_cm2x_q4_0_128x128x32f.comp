#version 450
// the Q4_0 cm2 kernel with the blocks decoded in the load, at 128x128, 32 deep, interior tiles on
// the unclamped unrolled path (CM2_FAST): a VKLLM_GPU_CM2_QTILE candidate (BenchmarkCM2Tiles)
#define T_Q4_0
#define CM2_XH
#define CM2_FAST
#define CM2_BM 128
#define CM2_BN 128
#define CM2_BK 32

#include "matmul_cm2.glsl"
