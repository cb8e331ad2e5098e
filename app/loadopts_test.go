package app

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

// optionsEngine is a fake engine with two GPUs whose plan fits planFits positions on GPU 0 (and
// nothing on GPU 1), and which reloads with options as the sidecar does.
type optionsEngine struct {
	fakeEngine
	planFits int
	loads    []EngineLoad
	failLoad error
}

func (e *optionsEngine) Devices(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{"vulkan":[{"index":0,"name":"Big GPU"},{"index":1,"name":"Small GPU"}],"default":0,"cpu":{"model":"Test CPU","cores":8}}`), nil
}

func (e *optionsEngine) Plan(_ context.Context, req PlanRequest) (json.RawMessage, error) {
	armed, chosen := true, min(req.Ctx, e.planFits)
	if req.Device != nil && *req.Device == 1 {
		armed, chosen = false, 0
	}
	return json.Marshal(map[string]any{"ctx": map[string]any{"chosen": chosen}, "verdict": map[string]any{"armed": armed, "text": "the plan's line - VKLLM_GPU_VRAM_MB pins the cap"}})
}

func (e *optionsEngine) LoadModelWith(_ context.Context, l EngineLoad) (engine.ModelInfo, error) {
	e.loads = append(e.loads, l)
	if e.failLoad != nil {
		return engine.ModelInfo{}, e.failLoad
	}
	info := e.model
	info.Context, info.Backend, info.Placement, info.CPUReason = l.Ctx, "vulkan", "resident", ""
	if l.Ctx == 0 {
		info.Context = info.ContextLength
	}
	if l.Backend == "cpu" {
		info.Backend, info.Placement, info.CPUReason = "cpu", "cpu", "On the CPU: forced by --cpu."
	}
	e.model = info
	return info, nil
}

// memOptions is an in-memory LoadOptionsStore.
type memOptions map[string]string

func (m memOptions) LoadOptions(_ context.Context, path string) (string, bool, error) {
	s, ok := m[path]
	return s, ok, nil
}

func (m memOptions) SetLoadOptions(_ context.Context, path, options string) error {
	m[path] = options
	return nil
}

func newOptionsService() (*LoadOptionsService, *optionsEngine, memOptions, *recorder) {
	eng := &optionsEngine{planFits: 8192}
	eng.model = engine.ModelInfo{Name: "m.gguf", Path: "/m/m.gguf", ContextLength: 32768, Context: 8192, Backend: "vulkan", Placement: "resident"}
	st, rec := memOptions{}, &recorder{}
	return NewLoadOptionsService(context.Background(), eng, eng, st, rec), eng, st, rec
}

func TestLoadOptionsShowBothContextBoundsAndTheDevices(t *testing.T) {
	svc, _, _, _ := newOptionsService()
	cases := []struct {
		device       string
		planContext  int
		planDevice   string
		verdictEmpty bool
	}{
		{"auto", 8192, "GPU 0: Big GPU", false},
		{"gpu:0", 8192, "GPU 0: Big GPU", false},
		{"gpu:1", 0, "GPU 1: Small GPU", false}, // the plan declines: no GPU bound
		{"cpu", 0, "GPU 0: Big GPU", true},      // no plan on the CPU
	}
	for _, c := range cases {
		st, err := svc.Preview(c.device)
		if err != nil {
			t.Fatal(err)
		}
		if st.TrainedContext != 32768 || st.PlanContext != c.planContext || st.PlanDevice != c.planDevice || (st.PlanVerdict == "") != c.verdictEmpty {
			t.Errorf("%s: trained %d plan %d on %q verdict %q; want 32768, %d on %q", c.device, st.TrainedContext, st.PlanContext, st.PlanDevice, st.PlanVerdict, c.planContext, c.planDevice)
		}
		if strings.Contains(st.PlanVerdict, "VKLLM_") || strings.Contains(st.PlanVerdict, "plan's line") {
			t.Errorf("%s: the verdict %q is the plan's line, not the app's words", c.device, st.PlanVerdict)
		}
	}
	st, _ := svc.Current()
	var values []string
	for _, d := range st.Devices {
		values = append(values, d.Value)
	}
	if got := strings.Join(values, " "); got != "auto gpu:0 gpu:1 cpu" {
		t.Errorf("device choices %q, want auto, both GPUs and the CPU", got)
	}
	if st.Devices[3].Label != "CPU: Test CPU, 8 cores" {
		t.Errorf("CPU label %q", st.Devices[3].Label)
	}
	if st.Options != (LoadOptions{Device: "auto", KV: "f16"}) || st.Saved {
		t.Errorf("options of a model never set: %+v saved %v, want the defaults, unsaved", st.Options, st.Saved)
	}
}

func TestApplyReloadsWithTheOptionsAndSavesThemForTheModel(t *testing.T) {
	cases := []struct {
		name    string
		opts    LoadOptions
		want    EngineLoad
		backend string
		reason  string
	}{
		{"a shorter context on the GPU", LoadOptions{Context: 4096}, EngineLoad{Path: "/m/m.gguf", Ctx: 4096, Backend: "auto", KV: "f16"}, "vulkan", ""},
		{"a named GPU", LoadOptions{Context: 2048, Device: "gpu:0"}, EngineLoad{Path: "/m/m.gguf", Ctx: 2048, Backend: "auto", Device: new(int), KV: "f16"}, "vulkan", ""},
		{"the CPU with an f32 cache", LoadOptions{Context: 16384, Device: "cpu", KV: "f32"}, EngineLoad{Path: "/m/m.gguf", Ctx: 16384, Backend: "cpu", KV: "f32"}, "cpu", CPUChosenReason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc, eng, st, rec := newOptionsService()
			got, err := svc.Apply(c.opts)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			l := eng.loads[len(eng.loads)-1]
			if l.Path != c.want.Path || l.Ctx != c.want.Ctx || l.Backend != c.want.Backend || l.KV != c.want.KV || (l.Device == nil) != (c.want.Device == nil) || (l.Device != nil && *l.Device != *c.want.Device) {
				t.Errorf("engine load %+v, want %+v", l, c.want)
			}
			if got.Model.Context != c.opts.Context || got.Model.Backend != c.backend || got.Model.CPUReason != c.reason {
				t.Errorf("after the reload: context %d on %s (%q), want %d on %s (%q)", got.Model.Context, got.Model.Backend, got.Model.CPUReason, c.opts.Context, c.backend, c.reason)
			}
			if !got.Saved || got.Options != c.opts.normalized() || st["/m/m.gguf"] == "" {
				t.Errorf("saved %v options %+v (store %q), want %+v saved", got.Saved, got.Options, st["/m/m.gguf"], c.opts.normalized())
			}
			var announced *engine.ModelInfo
			for _, ev := range rec.events {
				if e, ok := ev.payload.(EngineEvent); ok && e.Kind == "model" {
					announced = e.Model
				}
			}
			if announced == nil || announced.Context != c.opts.Context || announced.CPUReason != c.reason {
				t.Errorf("engine:event model %+v, want the reloaded model with its reason", announced)
			}
			if stored := StoredEngineLoad(context.Background(), st, "/m/m.gguf"); stored.Ctx != c.want.Ctx || stored.Backend != c.want.Backend || stored.KV != c.want.KV {
				t.Errorf("the next load of the model %+v, want %+v", stored, c.want)
			}
		})
	}
}

func TestApplyRefusesOptionsTheModelOrDeviceCannotTake(t *testing.T) {
	cases := []struct {
		name string
		opts LoadOptions
		want string
	}{
		{"more than the trained context", LoadOptions{Context: 65536, Device: "cpu"}, "more than the 32768 m.gguf was trained for"},
		{"more than the plan fits on the GPU", LoadOptions{Context: 16384, Device: "gpu:0"}, "does not fit GPU 0: Big GPU, where the plan fits 8192"},
		{"more than the plan fits, automatic", LoadOptions{Context: 16384}, "where the plan fits 8192"},
		{"negative context", LoadOptions{Context: -1}, "is negative"},
		{"a device not on this machine", LoadOptions{Device: "gpu:7"}, `device "gpu:7" is not on this machine`},
		{"an f32 cache on a GPU", LoadOptions{Device: "gpu:0", KV: "f32"}, "kept by the CPU only"},
		{"an unknown cache type", LoadOptions{Device: "cpu", KV: "q4_0"}, `KV cache type "q4_0" is not one the engine keeps`},
	}
	for _, c := range cases {
		svc, eng, st, _ := newOptionsService()
		if _, err := svc.Apply(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.want)
		}
		if len(eng.loads) != 0 || len(st) != 0 {
			t.Errorf("%s: refused options still reloaded (%d) or saved (%v)", c.name, len(eng.loads), st)
		}
	}
	// A context the plan does not bound (the plan declines GPU 1) goes up to the trained one.
	svc, _, _, _ := newOptionsService()
	if _, err := svc.Apply(LoadOptions{Context: 32768, Device: "gpu:1"}); err != nil {
		t.Errorf("the trained context on a GPU the plan declines: %v, want it accepted (it runs on the CPU)", err)
	}
}

func TestAFailedReloadSaysWhatRunsNowAndSavesNothing(t *testing.T) {
	cases := []struct {
		name    string
		cause   string
		gone    bool // nothing is loaded after the failure
		want    string
		emitted bool
	}{
		{"the engine's own word", "load model: out of device memory", false, "reload m.gguf with these options: load model: out of device memory; it keeps running as before", true},
		{"the sidecar says who keeps serving", "load model: out of device memory; m.gguf keeps serving (fix the file or open another one)", false, "out of device memory; m.gguf keeps serving (fix the file or open another one)", true},
		{"nothing loaded", "load model: out of device memory; reloading the previous model failed too, so none is loaded: open a model file", true, "so none is loaded: open a model file", false},
	}
	for _, c := range cases {
		svc, eng, st, rec := newOptionsService()
		eng.failLoad = errors.New(c.cause)
		if c.gone {
			svc.engine = goneEngine{eng}
		}
		_, err := svc.Apply(LoadOptions{Context: 4096})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "keeps") > 1 {
			t.Errorf("%s: %v, want it to end %q", c.name, err, c.want)
		}
		if c.gone && strings.Contains(err.Error(), "keeps running") {
			t.Errorf("%s: %v says the model keeps running", c.name, err)
		}
		if len(st) != 0 {
			t.Errorf("%s: options of a failed reload were saved: %v", c.name, st)
		}
		if (len(rec.events) > 0) != c.emitted {
			t.Errorf("%s: %d engine:event model, want %v", c.name, len(rec.events), c.emitted)
		}
	}
}

// goneEngine has no model once its load failed.
type goneEngine struct{ *optionsEngine }

func (g goneEngine) Model(ctx context.Context) (engine.ModelInfo, error) {
	if g.failLoad != nil && len(g.loads) > 0 {
		return engine.ModelInfo{}, errors.New("no model loaded")
	}
	return g.optionsEngine.Model(ctx)
}

func TestStoredLoadOptionsFallBackToTheDefaults(t *testing.T) {
	cases := []struct {
		name   string
		stored string
		want   EngineLoad
	}{
		{"none saved", "", EngineLoad{Path: "/x", Backend: "auto", KV: "f16"}},
		{"not JSON", "{", EngineLoad{Path: "/x", Backend: "auto", KV: "f16"}},
		{"a malformed device", `{"device":"gpu:x"}`, EngineLoad{Path: "/x", Backend: "auto", KV: "f16"}},
		{"saved", `{"context":1024,"device":"cpu","kv":"f32"}`, EngineLoad{Path: "/x", Ctx: 1024, Backend: "cpu", KV: "f32"}},
	}
	for _, c := range cases {
		st := memOptions{}
		if c.stored != "" {
			st["/x"] = c.stored
		}
		got := StoredEngineLoad(context.Background(), st, "/x")
		if got.Path != c.want.Path || got.Ctx != c.want.Ctx || got.Backend != c.want.Backend || got.KV != c.want.KV || got.Device != nil {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
