// The benchmark's time left, from the steps already timed: each progress event (a warm-up or a
// repetition ending) times the step before it. The current test's remaining steps take its own
// mean step (its warm-up alone until a repetition has run); the tests not yet started take the
// mean of every step so far. Pure, so the e2e and the tab read the same numbers.

export interface EtaStep {
  test: string;
  phase: "warmup" | "rep" | "done" | string;
  step: number; // completed steps over all tests
  steps: number; // total
  reps: number; // timed repetitions of this test
  atMs: number; // when the step ended
}

export interface Eta {
  leftMs: number; // -1 = not known yet
  text: string; // "about 12 s left"
}

export function estimate(startedAtMs: number, steps: EtaStep[]): Eta {
  const timed = steps.filter((s) => s.phase === "warmup" || s.phase === "rep");
  if (timed.length === 0) return { leftMs: -1, text: "" };
  const last = timed[timed.length - 1];
  const durations: { test: string; phase: string; ms: number }[] = [];
  let prev = startedAtMs;
  for (const s of timed) {
    durations.push({ test: s.test, phase: s.phase, ms: Math.max(0, s.atMs - prev) });
    prev = s.atMs;
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const overall = mean(durations.map((d) => d.ms));
  const mine = durations.filter((d) => d.test === last.test);
  const reps = mine.filter((d) => d.phase === "rep").map((d) => d.ms);
  const perStep = reps.length > 0 ? mean(reps) : mean(mine.map((d) => d.ms));
  const doneInTest = mine.length; // warm-up + reps of this test so far
  const leftInTest = Math.max(0, last.reps + 1 - doneInTest);
  const leftElsewhere = Math.max(0, last.steps - last.step - leftInTest);
  const leftMs = leftInTest * perStep + leftElsewhere * overall;
  return { leftMs, text: leftMs <= 0 ? "finishing" : `about ${formatLeft(leftMs)} left` };
}

export function formatLeft(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${Math.max(1, s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}
