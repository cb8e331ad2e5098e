#version 450
// moe_route: see moe_route_kernel.glsl.
#include "moe_route_kernel.glsl"
