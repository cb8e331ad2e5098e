//go:build !amd64 || purego

package cpu

import "github.com/vkllm/vkllm/engine/quant"

func dotQ8_0(w, x []byte) float32 { return dotQ8_0Go(w, x) }
func dotQ4_0(w, x []byte) float32 { return dotQ4_0Go(w, x) }

// llamaOrderDot4 has no four-row kernel on this platform.
func llamaOrderDot4(t quant.Type, w []byte, x *[4][]byte, n int, out *[4]float32) bool { return false }

const vnni = false

// vnniDot4 has no kernel on this platform.
func vnniDot4(w []byte, x *[4][]byte, n int, out *[4]float32) bool { return false }

// vnniDot2xN has no kernel on this platform.
func vnniDot2xN(w0, w1 []byte, x []*byte, xlen, n int, out []float32) bool { return false }
