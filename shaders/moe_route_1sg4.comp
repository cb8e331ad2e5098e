#version 450
// moe_route_1sg4: moe_route with ROUTE_ONE_SUBGROUP at four experts a lane (ROUTE_SG_PER),
// taken where the subgroup's lanes hold every expert four at a time (Qwen3-30B-A3B's 128 on 32
// lanes): the first subgroup alone chooses (moe_route.glsl's routeOneSubgroup), with no
// barrier between choices; the same choice as moe_route.
#define ROUTE_ONE_SUBGROUP
#define ROUTE_SG_PER 4u
#include "moe_route_kernel.glsl"
