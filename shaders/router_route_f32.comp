#version 450
// router_route_f32: see router_route_f32_kernel.glsl.
#include "router_route_f32_kernel.glsl"
