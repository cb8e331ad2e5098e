#version 450
#define T_Q2_K
#define NR_ROWS 2u // K-quants: 2 rows per pass (8B Q4_K decode 115 t/s at 2, 95 at 4; H200, 2026-12-01)
#include "matvec_fast.glsl"
