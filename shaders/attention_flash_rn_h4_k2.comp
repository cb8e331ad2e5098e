#version 450
// attention_flash with FRESH_KV (a decode step's per-head-normed queries and key rotated and
// stored here, no rope_kv_norm stage before it), the variant of attention_flash_h4_k2.comp.
#define FRESH_KV
#define MAXHP 4u
#define KPL 2u
#include "attention_flash.glsl"
