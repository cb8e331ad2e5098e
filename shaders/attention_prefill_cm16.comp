#version 450
// attention_prefill_cm with Q and P rounded to fp16 once (FA_FP16; VKLLM_GPU_ATT_FP16=1)
#define FA_FP16
#include "attention_prefill_cm.glsl"
