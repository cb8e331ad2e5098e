#version 450
// router_route_f32_1sg4: router_route_f32 with ROUTE_ONE_SUBGROUP at four experts a lane
// (ROUTE_SG_PER), taken where the subgroup's lanes hold every expert four at a time
// (Qwen3-30B-A3B's 128 on 32 lanes): the first subgroup alone chooses, with no barrier between
// choices; the same choice as router_route_f32.
#define ROUTE_ONE_SUBGROUP
#define ROUTE_SG_PER 4u
#include "router_route_f32_kernel.glsl"
