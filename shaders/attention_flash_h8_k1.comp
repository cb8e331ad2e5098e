#version 450
// attention_flash for up to 8 heads a workgroup and heads of up to 64 dimensions.
#define MAXHP 8u
#define KPL 1u
#include "attention_flash.glsl"
