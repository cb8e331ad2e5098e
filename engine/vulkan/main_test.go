package vulkan

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// The package's tests share one context: device creation costs more than most kernel tests.
// It runs with the validation layer when installed, and TestMain fails the run if the layer
// reported any error.
var (
	testCtxOnce sync.Once
	testCtx     *Context
	testCtxErr  error
)

func ctxOrSkip(t *testing.T) *Context {
	t.Helper()
	testCtxOnce.Do(func() {
		testCtx, testCtxErr = Open(Options{Device: -1, Validate: true, Quiet: true})
	})
	if errors.Is(testCtxErr, ErrNoLoader) || errors.Is(testCtxErr, ErrNoDevice) {
		t.Skipf("no Vulkan here: %v", testCtxErr)
	}
	if testCtxErr != nil {
		t.Fatalf("open Vulkan context: %v", testCtxErr)
	}
	return testCtx
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testCtx != nil {
		n, last, active := testCtx.ValidationErrors()
		testCtx.Close()
		if active {
			fmt.Printf("vulkan validation layer: %d errors\n", n)
		} else {
			fmt.Println("vulkan validation layer: not installed, not checked")
		}
		if n > 0 {
			fmt.Printf("last validation error: %s\n", last)
			code = 1
		}
	}
	os.Exit(code)
}
