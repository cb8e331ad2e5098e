#version 450
#define T_Q4_0
#define UNITS_PER_PASS 2u // two units a lane per pass (fast.go, matvecUnits)
#include "matvec_fast.glsl"
