package cpu

import (
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// activation holds the current matmul input, one entry per token, in the layout the weight's
// dot product wants (llama.cpp's "vec_dot_type": Q8_0, Q8_1, Q8_K, or plain float32).
type activation struct {
	rows    [][]byte
	rounded []float32 // scratch for f16-rounded inputs
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
	cols, rows := w.Cols, w.Rows
	a := &r.act
	for len(a.rows) < n {
		a.rows = append(a.rows, nil)
	}
	for i := 0; i < n; i++ {
		xi := x[i*cols : (i+1)*cols]
		if w.Type == quant.F16 {
			// llama.cpp converts the input to f16 before multiplying with f16 weights
			if len(a.rounded) < cols {
				a.rounded = make([]float32, cols)
			}
			copy(a.rounded, xi)
			xi = a.rounded[:cols]
			roundF16(xi)
		}
		a.rows[i] = quant.QuantizeActivation(w.Type, xi, a.rows[i])
	}
	xq := a.rows[:n]
	r.pool.parallel(rows, max(1, minWorkPerChunk/(cols*n)), func(lo, hi int) {
		var quad [4][]byte
		var res [4]float32
		for row := lo; row < hi; row++ {
			wr := w.Row(row)
			i := 0
			for ; i+4 <= len(xq); i += 4 {
				copy(quad[:], xq[i:i+4])
				if !llamaOrderDot4(w.Type, wr, &quad, cols, &res) {
					break
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
	})
}
