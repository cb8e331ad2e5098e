#version 450
#include "attention_prefill_cm.glsl"
