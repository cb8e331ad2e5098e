package modeltest

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// Dequantize turns every quantized weight matrix of m (each Matrix, and each expert of an
// Experts tensor, wherever the model's layers hold them) into F32 rows holding exactly the
// values the quantized blocks decode to, in place. m must be a copy of its own (model.Load
// again): its matrices stop viewing the file.
//
// A backend computing on the dequantized model multiplies the same weights without rounding
// its activations, where on the quantized model it rounds them to 8 bits before each product
// as llama.cpp's CPU does. So the two runs of the CPU backend measure what that rounding alone
// does to a model's logits: the part of a reference's logits that a device which does not
// round (fp16 cooperative-matrix tiles) cannot be expected to reproduce.
func Dequantize(tb testing.TB, m *model.Model) {
	tb.Helper()
	if err := dequantizeValue(reflect.ValueOf(m)); err != nil {
		tb.Fatalf("dequantize the model: %v", err)
	}
}

var (
	matrixType  = reflect.TypeOf(model.Matrix{})
	expertsType = reflect.TypeOf(model.Experts{})
	modelPkg    = matrixType.PkgPath()
)

// dequantizeValue walks v through the model package's structs, their pointers and slices.
func dequantizeValue(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Type().Elem().PkgPath() != modelPkg {
			return nil
		}
		return dequantizeValue(v.Elem())
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if err := dequantizeValue(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		switch v.Type() {
		case matrixType:
			return dequantizeMatrix(v.Addr().Interface().(*model.Matrix))
		case expertsType:
			x := v.Addr().Interface().(*model.Experts)
			for i := range x.Matrices {
				if err := dequantizeMatrix(&x.Matrices[i]); err != nil {
					return err
				}
			}
			if len(x.Matrices) > 0 {
				x.Type = quant.F32
			}
			return nil
		}
		if v.Type().PkgPath() != modelPkg {
			return nil
		}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				if err := dequantizeValue(f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// dequantizeMatrix replaces a quantized matrix's rows by their F32 values.
func dequantizeMatrix(m *model.Matrix) error {
	if m.Type == quant.F32 || len(m.Data) == 0 {
		return nil
	}
	out := make([]byte, 4*m.Rows*m.Cols)
	row := make([]float32, m.Cols)
	for i := 0; i < m.Rows; i++ {
		if err := quant.Dequantize(m.Type, m.Row(i), row); err != nil {
			return fmt.Errorf("matrix %q row %d: %w", m.Name, i, err)
		}
		for j, x := range row {
			binary.LittleEndian.PutUint32(out[4*(i*m.Cols+j):], math.Float32bits(x))
		}
	}
	m.Type, m.Data, m.RowBytes = quant.F32, out, 4*m.Cols
	return nil
}
