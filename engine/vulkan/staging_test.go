package vulkan

import (
	"encoding/binary"
	"math/rand"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// The staging order: a window's stagings recorded once dry (the plan), then replayed with each
// staging recorded ahead, beside the previous one's products, into alternating halves. Each
// "product" here copies its staged rows out; the copies must hold exactly the rows asked for
// (fp16 of the reference), with and without the plan and when the recording leaves the plan,
// and the plan must save barriers (it gives no staging a stage of its own but the first).
func TestStagingAheadReplaysThePlan(t *testing.T) {
	c := ctxOrSkip(t)
	const k, rows = 256, 8
	rowBytes := uint64(2 * k)
	rng := rand.New(rand.NewSource(5))
	var ws [3][]byte
	var wb [3]*Buffer
	var want [3][]float32
	for i := range ws {
		var err error
		if ws[i], err = quant.Quantize(quant.Q8_0, randVec(rng, k*rows, 0.5)); err != nil {
			t.Fatal(err)
		}
		wb[i] = uploadBytes(t, c, ws[i])
		want[i] = dequantized(t, quant.Q8_0, ws[i], k*rows)
	}
	r := &Resident{c: c, stage: zeros(t, c, 2*4096)} // two 8 KiB halves
	job := func(w, n, row0 int, off uint64) stageJob {
		return stageJob{t: quant.Q8_0, w: wb[w].All(), k: k, rows: n, row0: row0, off: off}
	}
	window := []stageStep{
		{job(0, rows, 0, 0)},
		{job(1, rows, 0, 0), job(2, rows, 0, 4096)}, // two weights side by side
		{job(0, 4, 4, 0)},
		{job(2, 2, 1, 0)},
	}
	type copied struct {
		buf *Buffer
		job stageJob
	}
	record := func(s *Seq, steps []stageStep) (outs []copied) {
		for i, st := range steps {
			base := r.beginStaging(s, st, i > 0)
			for _, j := range st {
				o := zeros(t, c, int(rowBytes)*j.rows/4)
				if s.err == nil {
					s.Copy(r.stage, base+j.off, o, 0, rowBytes*uint64(j.rows))
				}
				outs = append(outs, copied{o, j})
			}
			r.stageAhead(s)
		}
		return outs
	}
	check := func(t *testing.T, outs []copied) {
		for n, o := range outs {
			got, err := o.buf.Read(0, o.buf.Size)
			if err != nil {
				t.Fatal(err)
			}
			w := slices.Index(wb[:], o.job.w.Buf)
			for i := 0; i < o.job.rows*k; i++ {
				g := binary.LittleEndian.Uint16(got[2*i:])
				if e := quant.F32ToF16(want[w][o.job.row0*k+i]); g != e {
					t.Fatalf("copy %d (weight %d rows %d..): element %d is %#04x, want %#04x", n, w, o.job.row0, i, g, e)
				}
			}
		}
	}
	runWindow := func(t *testing.T, plan, steps []stageStep) int {
		s, err := c.NewSeq()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Free()
		r.beginStagingPass(plan)
		outs := record(s, steps)
		r.beginStagingPass(nil)
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		check(t, outs)
		return s.barriers
	}

	// The dry recording collects the window's stagings in order.
	var plan []stageStep
	r.stageRec = &plan
	r.beginStagingPass(nil)
	record(&Seq{c: c, err: errDryRecording}, window)
	r.stageRec = nil
	if !slices.EqualFunc(plan, window, func(a, b stageStep) bool { return slices.Equal(a, b) }) {
		t.Fatalf("the dry recording collected %v, want %v", plan, window)
	}

	inPlace := runWindow(t, nil, window)
	ahead := runWindow(t, plan, window)
	if ahead >= inPlace {
		t.Fatalf("staging ahead recorded %d barriers, in place %d: nothing was recorded ahead", ahead, inPlace)
	}
	t.Logf("barriers: %d in place, %d staging ahead", inPlace, ahead)

	// A recording that leaves the plan (its third staging differs) still stages what it asks.
	left := slices.Clone(window)
	left[2] = stageStep{job(1, 3, 5, 0)}
	runWindow(t, plan, left)
}
