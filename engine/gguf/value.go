package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type tag of a metadata value, as stored in the file.
type ValueType uint32

// The GGUF metadata value types. The numbers are fixed by the format.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64"}

// String returns the type's name ("uint32"), or "type(N)" for an unknown tag.
func (t ValueType) String() string {
	if t.Valid() {
		return valueTypeNames[t]
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Valid reports whether t is one of the thirteen GGUF value types.
func (t ValueType) Valid() bool { return t <= TypeFloat64 }

// minSize is the fewest bytes a value of type t can occupy in a file; it bounds how many
// elements an array can claim given the bytes left.
func (t ValueType) minSize() uint64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64, TypeString: // a string is at least its 8-byte length
		return 8
	case TypeArray: // element type + count
		return 12
	}
	return 1
}

// Value is one metadata value: a scalar, a string or an array (whose elements may be arrays).
// The zero Value is invalid. Slices returned by the accessors are shared with the Value: do not
// modify them.
type Value struct {
	typ  ValueType
	elem ValueType // element type when typ is TypeArray
	x    any       // uint8 … float64, bool, string, or a typed slice ([]Value for nested arrays)
}

// Type is the value's type tag.
func (v Value) Type() ValueType { return v.typ }

// ElemType is the element type of an array value (meaningless for scalars).
func (v Value) ElemType() ValueType { return v.elem }

// Len is the number of elements of an array value, 0 for a scalar.
func (v Value) Len() int {
	switch a := v.x.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// Interface returns the Go value: uint8, int8, uint16, int16, uint32, int32, float32, bool,
// string, uint64, int64, float64, a slice of one of those, or []Value for an array of arrays.
func (v Value) Interface() any { return v.x }

// AsString returns a string value.
func (v Value) AsString() (string, bool) {
	s, ok := v.x.(string)
	return s, ok
}

// AsBool returns a bool value.
func (v Value) AsBool() (bool, bool) {
	b, ok := v.x.(bool)
	return b, ok
}

// AsUint returns an integer value of any width that is not negative.
func (v Value) AsUint() (uint64, bool) {
	switch x := v.x.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := v.signed(); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// AsInt returns an integer value of any width that fits an int64.
func (v Value) AsInt() (int64, bool) {
	if i, ok := v.signed(); ok {
		return i, true
	}
	switch x := v.x.(type) {
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

func (v Value) signed() (int64, bool) {
	switch x := v.x.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// AsFloat returns a float32 or float64 value, or an integer value converted to float64.
func (v Value) AsFloat() (float64, bool) {
	switch x := v.x.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.AsInt(); ok {
		return float64(i), true
	}
	if u, ok := v.AsUint(); ok {
		return float64(u), true
	}
	return 0, false
}

// AsStrings returns an array of strings.
func (v Value) AsStrings() ([]string, bool) {
	s, ok := v.x.([]string)
	return s, ok
}

// AsFloat32s returns an array of float32 as is, or an array of float64 converted.
func (v Value) AsFloat32s() ([]float32, bool) {
	switch a := v.x.(type) {
	case []float32:
		return a, true
	case []float64:
		out := make([]float32, len(a))
		for i, f := range a {
			out[i] = float32(f)
		}
		return out, true
	}
	return nil, false
}

// AsInt32s returns an array of int32 as is, or an array of another integer type converted when
// every element fits an int32.
func (v Value) AsInt32s() ([]int32, bool) {
	if a, ok := v.x.([]int32); ok {
		return a, true
	}
	if v.typ != TypeArray {
		return nil, false
	}
	switch v.elem {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeUint64, TypeInt64:
	default:
		return nil, false
	}
	n := v.Len()
	out := make([]int32, n)
	for i := range n {
		x, ok := v.Index(i).AsInt()
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// AsBools returns an array of bools (shared with the value: do not modify).
func (v Value) AsBools() ([]bool, bool) {
	a, ok := v.x.([]bool)
	return a, ok
}

// AsArray returns the elements of an array of arrays.
func (v Value) AsArray() ([]Value, bool) {
	a, ok := v.x.([]Value)
	return a, ok
}

// Index returns element i of an array value as a Value; the zero Value when out of range.
func (v Value) Index(i int) Value {
	if i < 0 || i >= v.Len() {
		return Value{}
	}
	switch a := v.x.(type) {
	case []uint8:
		return Value{typ: TypeUint8, x: a[i]}
	case []int8:
		return Value{typ: TypeInt8, x: a[i]}
	case []uint16:
		return Value{typ: TypeUint16, x: a[i]}
	case []int16:
		return Value{typ: TypeInt16, x: a[i]}
	case []uint32:
		return Value{typ: TypeUint32, x: a[i]}
	case []int32:
		return Value{typ: TypeInt32, x: a[i]}
	case []float32:
		return Value{typ: TypeFloat32, x: a[i]}
	case []bool:
		return Value{typ: TypeBool, x: a[i]}
	case []string:
		return Value{typ: TypeString, x: a[i]}
	case []uint64:
		return Value{typ: TypeUint64, x: a[i]}
	case []int64:
		return Value{typ: TypeInt64, x: a[i]}
	case []float64:
		return Value{typ: TypeFloat64, x: a[i]}
	case []Value:
		return a[i]
	}
	return Value{}
}

// String renders the value for people: strings quoted and shortened, arrays as
// "[3]int32{1, 2, 3}" with at most eight elements shown.
func (v Value) String() string {
	if v.x == nil {
		return "<invalid>"
	}
	if v.typ != TypeArray {
		return scalarString(v.x)
	}
	var b strings.Builder
	n := v.Len()
	fmt.Fprintf(&b, "[%d]%s{", n, v.elem)
	for i := range min(n, 8) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.Index(i).String())
	}
	if n > 8 {
		b.WriteString(", …")
	}
	b.WriteString("}")
	return b.String()
}

func scalarString(x any) string {
	if s, ok := x.(string); ok {
		const max = 80
		if len(s) > max {
			return strconv.Quote(s[:max]) + "…"
		}
		return strconv.Quote(s)
	}
	return fmt.Sprint(x)
}

// ValueOf makes a Value from a Go value: uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, uint64, int64, float64, a slice of one of those, []Value whose elements are all
// arrays (an array of arrays), or a Value itself.
func ValueOf(x any) (Value, error) {
	switch a := x.(type) {
	case Value:
		if a.x == nil {
			return Value{}, fmt.Errorf("value of the zero Value: no type")
		}
		return a, nil
	case uint8:
		return Value{typ: TypeUint8, x: a}, nil
	case int8:
		return Value{typ: TypeInt8, x: a}, nil
	case uint16:
		return Value{typ: TypeUint16, x: a}, nil
	case int16:
		return Value{typ: TypeInt16, x: a}, nil
	case uint32:
		return Value{typ: TypeUint32, x: a}, nil
	case int32:
		return Value{typ: TypeInt32, x: a}, nil
	case float32:
		return Value{typ: TypeFloat32, x: a}, nil
	case bool:
		return Value{typ: TypeBool, x: a}, nil
	case string:
		return Value{typ: TypeString, x: a}, nil
	case uint64:
		return Value{typ: TypeUint64, x: a}, nil
	case int64:
		return Value{typ: TypeInt64, x: a}, nil
	case float64:
		return Value{typ: TypeFloat64, x: a}, nil
	case []uint8:
		return array(TypeUint8, a), nil
	case []int8:
		return array(TypeInt8, a), nil
	case []uint16:
		return array(TypeUint16, a), nil
	case []int16:
		return array(TypeInt16, a), nil
	case []uint32:
		return array(TypeUint32, a), nil
	case []int32:
		return array(TypeInt32, a), nil
	case []float32:
		return array(TypeFloat32, a), nil
	case []bool:
		return array(TypeBool, a), nil
	case []string:
		return array(TypeString, a), nil
	case []uint64:
		return array(TypeUint64, a), nil
	case []int64:
		return array(TypeInt64, a), nil
	case []float64:
		return array(TypeFloat64, a), nil
	case []Value:
		for i, e := range a {
			if e.typ != TypeArray || e.x == nil {
				return Value{}, fmt.Errorf("value of []Value: element %d is a %v, expected an array (GGUF arrays of arrays only)", i, e.typ)
			}
		}
		return array(TypeArray, a), nil
	}
	return Value{}, fmt.Errorf("value of %T: not a GGUF metadata type", x)
}

func array[T any](elem ValueType, a []T) Value {
	if a == nil {
		a = []T{}
	}
	return Value{typ: TypeArray, elem: elem, x: a}
}
