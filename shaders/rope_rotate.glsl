// rope_rotate.glsl: element j of a normalized head rotated for token t as rope_kv rotates it
// (its arithmetic: each product rounded before the sum), included by rope_kv_norm.glsl. The
// including shader declares the head in shared hv[] and the rotation's cosines and sines cs[]
// (token t's pair i at 2·(t·ropeDim/2 + i)).
#include "rope_pair.glsl"

float ropeRotated(uint j, uint t, uint ropeDim, bool neox) {
    uint half_ = ropeDim / 2u;
    if (j >= ropeDim) return hv[j];
    bool first;
    uint i, a, b;
    if (neox) {
        first = j < half_;
        i = first ? j : j - half_;
        a = i;
        b = i + half_;
    } else {
        first = (j & 1u) == 0u;
        i = j / 2u;
        a = 2u * i;
        b = a + 1u;
    }
    float c = cs[2u * (t * half_ + i)], s = cs[2u * (t * half_ + i) + 1u];
    float x0 = hv[a], x1 = hv[b];
    vec2 rot = ropePair(x0, x1, c, s);
    return first ? rot.x : rot.y;
}
