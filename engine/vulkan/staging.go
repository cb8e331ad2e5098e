package vulkan

import (
	"errors"
	"slices"

	"github.com/vkllm/vkllm/engine/quant"
)

// The fp16 staging of quantized weights for the cooperative matrix 2 F16 kernel (usesCM2Staging).
//
// r.stage is two halves. A window's stagings alternate between them, and each product's
// dispatch is followed, in the same stage (no barrier between), by the next staging's
// dequantization into the other half: the memory-bound dequantization runs beside the
// compute-bound product instead of in a stage of its own. The order of the window's stagings
// comes from a dry recording of the window (plannedStagings: a Seq that records nothing),
// made once per window size. Without a plan (VKLLM_GPU_STAGE_AHEAD=0) each staging takes its
// own stage before its product, as it did with one half.

// stageJob is one DequantF16 of a staging: rows row0.. of weight w (type t, k-element rows)
// into the staging half at byte off.
type stageJob struct {
	t             quant.Type
	w             Binding
	k, rows, row0 int
	off           uint64
}

// stageStep is one staging: the jobs one stage dequantizes for the products of the next.
type stageStep []stageJob

// errDryRecording marks a Seq that records nothing: plannedStagings walks a window's recording
// with it to learn the order of its stagings.
var errDryRecording = errors.New("dry recording")

// stageHalfBytes is the size of one staging half.
func (r *Resident) stageHalfBytes() uint64 { return r.stage.Size / 2 / 256 * 256 }

// plannedStagings returns the stagings a window of m rows records, in order (nil where the
// context does not stage ahead), from a dry recording made once per window size.
func (r *Resident) plannedStagings(m int) []stageStep {
	if r.stage == nil || !r.c.stageAhead {
		return nil
	}
	if plan, ok := r.stagePlans[m]; ok {
		return plan
	}
	var steps []stageStep
	dry := &Seq{c: r.c, err: errDryRecording}
	r.beginStagingPass(nil)
	r.stageRec = &steps
	r.record(dry, m)
	r.stageRec = nil
	if r.stagePlans == nil {
		r.stagePlans = map[int][]stageStep{}
	}
	r.stagePlans[m] = steps
	return steps
}

// beginStagingPass resets the staging order at the start of a recording that replays plan
// (nil: every staging in its own stage).
func (r *Resident) beginStagingPass(plan []stageStep) {
	r.stagePlan, r.stageAt, r.stageReady = plan, 0, -1
}

// beginStaging makes the staging jobs (offsets within a half) ready for products recorded
// next and returns the byte offset of their half in r.stage: recorded ahead with the previous
// product (a barrier added if none came since), or now, in a stage of its own. staged says
// whether an earlier product of the caller may still read the stage.
func (r *Resident) beginStaging(s *Seq, jobs stageStep, staged bool) uint64 {
	if r.stageRec != nil {
		*r.stageRec = append(*r.stageRec, slices.Clone(jobs))
	}
	i := r.stageAt
	r.stageAt++
	base := uint64(i%2) * r.stageHalfBytes()
	if r.stageReady == i {
		r.stageReady = -1
		if slices.Equal(r.stagePlan[i], jobs) {
			if s.barriers == r.stageReadyBarrier {
				s.Barrier()
			}
			return base
		}
		// The recording left the plan: no more staging ahead; this half is rewritten below.
		r.stagePlan = nil
		staged = true
	}
	if staged {
		s.Barrier()
	}
	r.dequantJobs(s, jobs, base)
	s.Barrier()
	return base
}

// stageAhead records the next planned staging's dequantization into its half right after the
// products of the current one, in their stage. The half's previous readers, the products of
// the staging before the current one, are a barrier behind: the current staging's products
// waited for theirs.
func (r *Resident) stageAhead(s *Seq) {
	i := r.stageAt
	if r.stagePlan == nil || i >= len(r.stagePlan) {
		return
	}
	r.dequantJobs(s, r.stagePlan[i], uint64(i%2)*r.stageHalfBytes())
	r.stageReady, r.stageReadyBarrier = i, s.barriers
}

func (r *Resident) dequantJobs(s *Seq, jobs stageStep, base uint64) {
	for _, j := range jobs {
		s.DequantF16(j.t, j.w, r.stage.Range(base+j.off, uint64(2*j.rows*j.k)), j.k, j.rows, j.row0)
	}
}

// stagedMatMul records Y (+)= W·X for one weight slice on the cooperative matrix 2 F16 kernel:
// as many of its rows as a staging half holds (a multiple of the F16 kernel's row tile) are
// dequantized to fp16 there and multiplied with the fp16 activations xh, chunk after chunk.
// staged says whether an earlier product of the same project call may still read r.stage.
func (r *Resident) stagedMatMul(s *Seq, t quant.Type, sl weightSlice, xh Binding, y *Buffer, k, m, yStride int, acc bool, staged *bool) {
	bm := r.c.cm2F16.bm
	chunk := max(bm, int(r.stageHalfBytes())/(2*k)/bm*bm)
	for c0 := 0; c0 < sl.rows; c0 += chunk {
		n := min(chunk, sl.rows-c0)
		base := r.beginStaging(s, stageStep{{t: t, w: sl.buf.All(), k: k, rows: n, row0: c0}}, *staged)
		h := r.stage.Range(base, uint64(2*n*k))
		part := weightSlice{buf: sl.buf, row0: sl.row0 + c0, rows: n}
		s.MatMulF16X(quant.F16, h, xh, part.out(y, 0, m, yStride), k, n, m, yStride, acc)
		r.stageAhead(s)
		*staged = true
	}
}
