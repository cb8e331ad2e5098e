// last_arrival.glsl: the hand-off of a kernel whose last workgroup to finish combines what the
// others wrote (argmax_wide, router_route_f32). The including shader declares
// `coherent buffer { uint arrivals[]; }`, the counts, each 0 between dispatches.

shared bool lastArrivalFlag;

// lastToArrive counts the workgroup in arrivals[slot] once every thread's buffer writes reach
// memory, and reports whether it was the last of `expected` (then every counted workgroup's
// writes are visible to it); uniform over the workgroup. Every thread calls it, after its
// writes; the last resets the count with arrivalDone.
bool lastToArrive(uint slot, uint expected) {
    memoryBarrierBuffer(); // this thread's writes reach memory before the count
    barrier();             // every thread's have
    if (gl_LocalInvocationIndex == 0u) lastArrivalFlag = atomicAdd(arrivals[slot], 1u) == expected - 1u;
    barrier();
    bool last = lastArrivalFlag;
    if (last) memoryBarrierBuffer(); // every counted workgroup has written: read it
    return last;
}

// arrivalDone resets arrivals[slot] for the next dispatch; the last workgroup calls it.
void arrivalDone(uint slot) {
    if (gl_LocalInvocationIndex == 0u) arrivals[slot] = 0u;
}
