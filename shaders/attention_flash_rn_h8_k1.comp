#version 450
// attention_flash with FRESH_KV (a decode step's per-head-normed queries and key rotated and
// stored here, no rope_kv_norm stage before it), the variant of attention_flash_h8_k1.comp.
#define FRESH_KV
#define MAXHP 8u
#define KPL 1u
#include "attention_flash.glsl"
