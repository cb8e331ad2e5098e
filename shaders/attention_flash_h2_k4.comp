#version 450
// attention_flash for up to 2 heads a workgroup and heads of up to 256 dimensions.
#define MAXHP 2u
#define KPL 4u
#include "attention_flash.glsl"
