//go:build js && wasm

package main

import "syscall/js"

// main defines vkllmPlan on the page's global object and stays, so the page can call it.
func main() {
	js.Global().Set("vkllmPlan", js.FuncOf(func(_ js.Value, args []js.Value) any {
		if len(args) != 1 || args[0].Type() != js.TypeString {
			return `{"error":"vkllmPlan takes one argument: the plan input as a JSON string"}`
		}
		out, err := planJSON([]byte(args[0].String()))
		if err != nil {
			return errorJSON(err)
		}
		return string(out)
	}))
	select {}
}
