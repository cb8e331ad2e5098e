#version 450
// attention_prefill_cm2 for 128-wide heads (VKLLM_GPU_ATT_CM2)
#define FA_HD 128
#include "attention_prefill_cm2.glsl"
