package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/app"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sidecar"
	"github.com/vkllm/vkllm/store"
)

// loadsLogEnv names the file the test sidecar appends one line per model load to.
const loadsLogEnv = "VKLLM_TEST_SIDECAR_LOADS"

// TestMain lets this test binary stand in for the app's sidecar: started as `<test binary>
// serve ...` (VKLLM_SIDECAR) with loadsLogEnv set, it serves the real engine and writes every
// load it makes, start-up included, to that file.
func TestMain(m *testing.M) {
	if log := os.Getenv(loadsLogEnv); log != "" && len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serveCountingLoads(os.Args[2:], log))
	}
	os.Exit(m.Run())
}

func serveCountingLoads(args []string, log string) int {
	opts, err := serveOptions(args)
	if err != nil {
		os.Stderr.WriteString("serve: " + err.Error() + "\n")
		return 2
	}
	opts.Load = func(ctx context.Context, o engine.LoadOptions) (sidecar.Model, error) {
		line, _ := json.Marshal(struct {
			Path    string `json:"path"`
			Ctx     int    `json:"ctx"`
			Backend string `json:"backend"`
			KV      string `json:"kv"`
		}{o.Path, o.Context, string(o.Backend), o.KV})
		if f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Write(append(line, '\n'))
			f.Close()
		}
		return engine.Load(ctx, o)
	}
	// The supervisor ends its sidecar with a signal, so Serve runs until the process dies.
	if err := sidecar.Serve(context.Background(), opts); err != nil {
		os.Stderr.WriteString("serve: " + err.Error() + "\n")
		return 1
	}
	return 0
}

// TestTheStartUpModelLoadsOnceWithItsSavedOptions starts the app's services as main does, over a
// store holding load options for the embedded model, and counts the engine's loads: one, with
// the saved context, device and KV cache type (it used to load with the defaults, then again
// with the options). Without saved options, the one load has the defaults.
func TestTheStartUpModelLoadsOnceWithItsSavedOptions(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		saved   string   // "" = none saved
		want    []string // the load lines
		wantCtx int
	}{
		{"saved options", `{"context":128,"device":"cpu","kv":"f32"}`, []string{`{"path":"","ctx":128,"backend":"cpu","kv":"f32"}`}, 128},
		{"no saved options (control)", "", []string{`{"path":"","ctx":0,"backend":"auto","kv":"f16"}`}, 0},
		// Options the engine refuses (an f32 cache off the CPU, saved before it was refused):
		// the model still opens, on the default device and cache, in a second load.
		{"refused saved options", `{"context":128,"kv":"f32"}`, []string{`{"path":"","ctx":128,"backend":"auto","kv":"f32"}`, `{"path":"","ctx":128,"backend":"auto","kv":"f16"}`}, 128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "loads")
			t.Setenv("VKLLM_DATA_DIR", filepath.Join(dir, "data"))
			t.Setenv("HOME", dir)
			t.Setenv("VKLLM_SIDECAR", self)
			t.Setenv(loadsLogEnv, log)
			// No GPU for the control either: its load is checked as flags, not as a placement.
			t.Setenv("VKLLM_GPU_VRAM_MB", "1")
			if c.saved != "" {
				st, err := store.Open("")
				if err != nil {
					t.Fatal(err)
				}
				if err := st.SetLoadOptions(context.Background(), "", c.saved); err != nil {
					t.Fatal(err)
				}
				st.Close()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			svc, closeAll, err := startServices(ctx, "", app.EmitterFunc(func(string, any) {}))
			if err != nil {
				t.Fatal(err)
			}
			info, err := svc.Model.Current()
			closeAll()
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(log)
			if err != nil {
				t.Fatalf("the sidecar logged no load: %v", err)
			}
			loads := strings.Split(strings.TrimSpace(string(raw)), "\n")
			if strings.Join(loads, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("the engine loaded %d times at start: %q, want %q", len(loads), loads, c.want)
			}
			if c.wantCtx != 0 && info.Context != c.wantCtx {
				t.Errorf("the model runs at ctx %d, want the saved %d", info.Context, c.wantCtx)
			}
		})
	}
}

func TestServeArgsReadBackAsTheLoad(t *testing.T) {
	dev := 1
	for _, l := range []app.EngineLoad{
		{Path: "/m/a.gguf", Ctx: 4096, Backend: "auto", Device: &dev, KV: "f16"},
		{Path: "", Ctx: 0, Backend: "cpu", KV: "f32"},
		{Path: "/m/b.gguf", Backend: "gpu"},
	} {
		args := serveArgs(l)
		if args[0] != "serve" {
			t.Fatalf("serveArgs(%+v) = %q, want serve first", l, args)
		}
		o, err := serveOptions(args[1:])
		if err != nil {
			t.Fatalf("serveOptions(%q): %v", args, err)
		}
		if o.ModelPath != l.Path || o.Context != l.Ctx || string(o.Backend) != l.Backend || o.KV != l.KV ||
			(o.Device == nil) != (l.Device == nil) || o.Device != nil && *o.Device != *l.Device {
			t.Errorf("serveArgs(%+v) = %q reads back as %+v", l, args, o)
		}
	}
}
