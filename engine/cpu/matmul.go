package cpu

import (
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// activation holds the current matmul input, one entry per token, in the layout the weight's
// dot product wants (llama.cpp's "vec_dot_type": Q8_0, Q8_1, Q8_K, or plain float32).
type activation struct {
	rows    [][]byte
	vnni    [][]byte  // rows in the VNNI layout, for Q8_0 weights and batches of 4 or more
	vnniPtr []*byte   // their first bytes, for the two-row kernel
	rounded []float32 // scratch for f16-rounded inputs
	useVNNI bool      // vnni holds the rows

	// what the rows hold: n inputs of cols values from src, for weights of type typ
	typ     quant.Type
	cols, n int
	src     *float32
}

// minWorkPerChunk is the number of multiply-adds below which splitting a matmul across threads
// costs more than it saves.
const minWorkPerChunk = 1 << 15

// dotSupported reports whether matmul can multiply weights of type t.
func dotSupported(t quant.Type) bool { return t.Valid() }

// matmul sets out[i*w.Rows+r] = w.Row(r) · x[i*w.Cols:(i+1)*w.Cols] for the n tokens of x.
// Each token's input is quantized once; then the rows are split across the pool and every
// weight row is multiplied with all n inputs while it is in cache. Weights are never
// dequantized as a whole.
func (r *Runner) matmul(out []float32, w model.Matrix, x []float32, n int) {
	r.prepare(w, x, n)
	r.multiply(out, w, n)
}

// matmulSameInput is matmul for an input x unchanged since the previous matmul: its quantized
// form is reused when the weight type and width match.
func (r *Runner) matmulSameInput(out []float32, w model.Matrix, x []float32, n int) {
	a := &r.act
	if a.typ != w.Type || a.cols != w.Cols || a.n != n || a.src != &x[0] {
		r.prepare(w, x, n)
	}
	r.multiply(out, w, n)
}

// prepare quantizes the n inputs of x for multiplying with w (in parallel for a batch).
func (r *Runner) prepare(w model.Matrix, x []float32, n int) {
	cols := w.Cols
	a := &r.act
	for len(a.rows) < n {
		a.rows = append(a.rows, nil)
	}
	useVNNI := vnni && w.Type == quant.Q8_0 && n >= 4
	for useVNNI && len(a.vnni) < n {
		a.vnni = append(a.vnni, nil)
	}
	a.typ, a.cols, a.n, a.src = w.Type, cols, n, &x[0]
	if w.Type == quant.F16 {
		for i := 0; i < n; i++ {
			// llama.cpp converts the input to f16 before multiplying with f16 weights
			if len(a.rounded) < cols {
				a.rounded = make([]float32, cols)
			}
			xi := a.rounded[:cols]
			copy(xi, x[i*cols:(i+1)*cols])
			roundF16(xi)
			a.rows[i] = quant.QuantizeActivation(w.Type, xi, a.rows[i])
		}
	} else {
		r.pool.parallel(n, max(1, 4096/cols), func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				a.rows[i] = quant.QuantizeActivation(w.Type, x[i*cols:(i+1)*cols], a.rows[i])
				if useVNNI {
					a.vnni[i] = vnniActivation(a.rows[i], a.vnni[i])
				}
			}
		})
	}
	a.vnniPtr = a.vnniPtr[:0]
	if useVNNI {
		for i := 0; i < n&^3; i++ {
			a.vnniPtr = append(a.vnniPtr, &a.vnni[i][0])
		}
	}
	a.useVNNI = useVNNI
}

// multiply runs the matmul of w with the prepared inputs into out.
func (r *Runner) multiply(out []float32, w model.Matrix, n int) {
	cols, rows := w.Cols, w.Rows
	a := &r.act
	r.mm = matmulJob{out: out, w: w, xq: a.rows[:n]}
	if a.useVNNI {
		r.mm.xv, r.mm.xvp, r.mm.xvLen = a.vnni[:n], a.vnniPtr, len(a.vnni[0])
	}
	r.pool.parallel(rows, max(1, minWorkPerChunk/(cols*n)), r.mmRows)
	r.mm = matmulJob{}
}

// matmulJob is the matmul in progress, read by matmulRows on every thread.
type matmulJob struct {
	out   []float32
	w     model.Matrix
	xq    [][]byte
	xv    [][]byte // xq in the VNNI layout, or nil
	xvp   []*byte  // the first len(xv)&^3 rows of xv as pointers
	xvLen int      // bytes of each xv row
}

// matmulRows computes rows lo..hi-1 of the current matmul.
func (r *Runner) matmulRows(_, lo, hi int) {
	out, w, xq, xv, xvp := r.mm.out, r.mm.w, r.mm.xq, r.mm.xv, r.mm.xvp
	cols, rows := w.Cols, w.Rows
	var quad [4][]byte
	var res [4]float32
	var pair [2 * maxBatch]float32
	row := lo
	// with the VNNI layout, pairs of rows share each instruction of the 512-bit kernel
	for ; len(xvp) > 0 && row+2 <= hi; row += 2 {
		w0, w1 := w.Row(row), w.Row(row+1)
		if !vnniDot2xN(w0, w1, xvp, r.mm.xvLen, cols, pair[:]) {
			break
		}
		for g := 0; g < len(xvp)/4; g++ {
			for j := 0; j < 4; j++ {
				i := 4*g + j
				out[i*rows+row] = pair[8*g+j]
				out[i*rows+row+1] = pair[8*g+4+j]
			}
		}
		for i := len(xvp); i < len(xq); i++ {
			out[i*rows+row], _ = llamaOrderDot(w.Type, w0, xq[i], cols)
			out[i*rows+row+1], _ = llamaOrderDot(w.Type, w1, xq[i], cols)
		}
	}
	for ; row < hi; row++ {
		wr := w.Row(row)
		i := 0
		for ; i+4 <= len(xq); i += 4 {
			if xv != nil {
				copy(quad[:], xv[i:i+4])
				if !vnniDot4(wr, &quad, cols, &res) {
					break
				}
			} else {
				copy(quad[:], xq[i:i+4])
				if !llamaOrderDot4(w.Type, wr, &quad, cols, &res) {
					break
				}
			}
			for j, v := range res {
				out[(i+j)*rows+row] = v
			}
		}
		for ; i < len(xq); i++ {
			xi := xq[i]
			if v, ok := llamaOrderDot(w.Type, wr, xi, cols); ok {
				out[i*rows+row] = v
				continue
			}
			out[i*rows+row] = quant.DotQuantized(w.Type, wr, xi, cols)
		}
	}
}
