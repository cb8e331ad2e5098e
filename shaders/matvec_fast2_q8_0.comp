#version 450
#define T_Q8_0
#define UNITS_PER_PASS 2u // two units a lane per pass (fast.go, matvecUnits)
#include "matvec_fast.glsl"
