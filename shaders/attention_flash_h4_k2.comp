#version 450
// attention_flash for up to 4 heads a workgroup and heads of up to 128 dimensions.
#define MAXHP 4u
#define KPL 2u
#include "attention_flash.glsl"
