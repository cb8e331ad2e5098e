package app

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

func TestPinServiceValidatesAndRoundTrips(t *testing.T) {
	st := newMemStore()
	svc := NewPinService(context.Background(), st, nil)
	bad := []struct {
		key  string
		mb   int
		want string
	}{
		{"", 4096, "no device key"},
		{"10de:2684:abcd", 0, "not a size"},
		{"10de:2684:abcd", -5, "not a size"},
	}
	for _, b := range bad {
		if err := svc.Set(b.key, b.mb); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Set(%q, %d) = %v, want an error with %q", b.key, b.mb, err, b.want)
		}
	}
	if err := svc.Set(" 10de:2684:abcd ", 12000); err != nil {
		t.Fatal(err)
	}
	pins, _ := svc.List()
	if len(pins) != 1 || pins[0] != (Pin{DeviceKey: "10de:2684:abcd", MB: 12000}) {
		t.Fatalf("pins = %+v, want the one set", pins)
	}
	if err := svc.Clear("10de:2684:abcd"); err != nil {
		t.Fatal(err)
	}
	if pins, _ := svc.List(); len(pins) != 0 || pins == nil {
		t.Fatalf("pins after clear = %#v, want an empty list", pins)
	}
}

func TestModelOpenLoadsAndAnnouncesTheModel(t *testing.T) {
	eng := &fakeEngine{}
	rec := &recorder{}
	svc := NewModelService(context.Background(), eng, rec)
	if _, err := svc.Open("  "); err == nil {
		t.Fatal("empty path accepted")
	}
	info, err := svc.Open("/models/x.gguf")
	if err != nil || info.Path != "/models/x.gguf" {
		t.Fatalf("Open = %+v, %v", info, err)
	}
	if len(rec.events) != 1 || rec.events[0].name != EventEngine || rec.events[0].payload.(EngineEvent).Model.Path != "/models/x.gguf" {
		t.Fatalf("events = %+v, want one engine:event with the model", rec.events)
	}
}

func TestEngineEventsDropTheDomainPrefix(t *testing.T) {
	rec := &recorder{}
	EmitEngineEvent(rec, "engine:restarted", "exit status 137", 1700000000000)
	ev := rec.events[0].payload.(EngineEvent)
	if rec.events[0].name != EventEngine || ev.Kind != "restarted" || ev.Reason != "exit status 137" || ev.AtMs != 1700000000000 {
		t.Fatalf("event = %s %+v", rec.events[0].name, ev)
	}
}

func TestPlanAndDevicesPassTheEngineReportThrough(t *testing.T) {
	eng := &fakeEngine{}
	dev := 1
	raw, err := NewPlanService(context.Background(), eng).Plan(PlanRequest{Model: "/m.gguf", Ctx: 4096, Device: &dev})
	if err != nil || string(raw) != `{"ctx":4096,"path":"/m.gguf"}` {
		t.Fatalf("Plan = %s, %v", raw, err)
	}
	raw, err = NewDevicesService(context.Background(), eng).List()
	if err != nil || !strings.Contains(string(raw), `"fake"`) {
		t.Fatalf("List = %s, %v", raw, err)
	}
}

// failingLoad is the fake engine whose loads fail while its model keeps serving.
type failingLoad struct{ *fakeEngine }

func (f failingLoad) LoadModel(context.Context, string) (engine.ModelInfo, error) {
	return engine.ModelInfo{}, errors.New(`load model "/models/bad.gguf": not a GGUF file; old.gguf keeps serving (fix the file or open another one)`)
}

func TestModelOpenThatFailsAnnouncesTheModelStillServing(t *testing.T) {
	eng := failingLoad{&fakeEngine{model: engine.ModelInfo{Name: "old.gguf", Path: "/models/old.gguf"}}}
	rec := &recorder{}
	_, err := NewModelService(context.Background(), eng, rec).Open("/models/bad.gguf")
	if err == nil || !strings.Contains(err.Error(), "old.gguf keeps serving") {
		t.Fatalf("Open of a bad file: %v, want the engine's error naming the model that serves", err)
	}
	if len(rec.events) != 1 || rec.events[0].payload.(EngineEvent).Model == nil || rec.events[0].payload.(EngineEvent).Model.Name != "old.gguf" {
		t.Fatalf("events = %+v, want one model event naming old.gguf", rec.events)
	}
}

// fixedDevices is an engine device list.
type fixedDevices struct {
	raw string
	err error
}

func (f fixedDevices) Devices(context.Context) (json.RawMessage, error) {
	return json.RawMessage(f.raw), f.err
}

// A pin may name only a GPU this machine has; the refusal names the ones there are.
func TestPinServiceAcceptsOnlyThisMachinesGPUs(t *testing.T) {
	const two = `{"vulkan":[{"index":0,"name":"NVIDIA H200","vendor_id":4318,"device_id":9013,"uuid":"18c4"},{"index":1,"name":"llvmpipe","vendor_id":65541,"device_id":0,"uuid":"6d65"}]}`
	for _, c := range []struct {
		name, devices, key string
		listErr            error
		want               string // "" accepts
	}{
		{"the first GPU", two, "10de:2335:18c4", nil, ""},
		{"the second GPU", two, "10005:0000:6d65", nil, ""},
		{"a made-up key", two, "10de:2684:abcd", nil, "pick one of: GPU 0 NVIDIA H200 (10de:2335:18c4), GPU 1 llvmpipe (10005:0000:6d65)"},
		{"no GPU at all", `{"vulkan":[]}`, "10de:2335:18c4", nil, "no Vulkan GPU to pin"},
		{"the engine is down", "", "10de:2335:18c4", errors.New("connection refused"), "could not be listed (connection refused)"},
	} {
		st := newMemStore()
		svc := NewPinService(context.Background(), st, fixedDevices{c.devices, c.listErr})
		err := svc.Set(c.key, 4096)
		pins, _ := svc.List()
		switch {
		case c.want == "" && (err != nil || len(pins) != 1):
			t.Errorf("%s: Set = %v, pins %v; want it kept", c.name, err, pins)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || len(pins) != 0):
			t.Errorf("%s: Set = %v, pins %v; want a refusal with %q and nothing kept", c.name, err, pins, c.want)
		}
	}
}
