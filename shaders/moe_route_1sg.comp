#version 450
// moe_route_1sg: moe_route with ROUTE_ONE_SUBGROUP: where the first subgroup can hold every expert,
// it alone chooses (moe_route.glsl's routeOneSubgroup), with no barrier between choices.
#define ROUTE_ONE_SUBGROUP
#include "moe_route_kernel.glsl"
