#version 450
// router_route_f32_1sg: router_route_f32 with ROUTE_ONE_SUBGROUP: where the first subgroup can hold every expert,
// it alone chooses (moe_route.glsl's routeOneSubgroup), with no barrier between choices.
#define ROUTE_ONE_SUBGROUP
#include "router_route_f32_kernel.glsl"
