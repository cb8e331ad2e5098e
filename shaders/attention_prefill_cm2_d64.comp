#version 450
// attention_prefill_cm2 for 64-wide heads (VKLLM_GPU_ATT_CM2)
#define FA_HD 64
#include "attention_prefill_cm2.glsl"
