#version 450
// attention_flash for up to 4 heads a workgroup and heads of up to 256 dimensions.
#define MAXHP 4u
#define KPL 4u
#include "attention_flash.glsl"
