//go:build !(js && wasm)

package main

import (
	"fmt"
	"io"
	"os"
)

// main outside WebAssembly: the plan input on stdin, the plan on stdout (the same function the
// page calls).
func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "planwasm: read the plan input from stdin: %v\n", err)
		os.Exit(1)
	}
	out, err := planJSON(input)
	if err != nil {
		fmt.Fprintln(os.Stderr, "planwasm:", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(out, '\n'))
}
