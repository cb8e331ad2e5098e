//go:build !amd64 || purego

package cpu

import "github.com/vkllm/vkllm/engine/quant"

func dotQ8_0(w, x []byte) float32 { return dotQ8_0Go(w, x) }
func dotQ4_0(w, x []byte) float32 { return dotQ4_0Go(w, x) }

// llamaOrderDot4 has no four-row kernel on this platform.
func llamaOrderDot4(t quant.Type, w []byte, x *[4][]byte, n int, out *[4]float32) bool { return false }
