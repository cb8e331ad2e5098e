package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

type planInputFake struct {
	fakeEngine
	got PlanRequest
}

func (f *planInputFake) PlanInput(_ context.Context, req PlanRequest) (json.RawMessage, error) {
	f.got = req
	return json.RawMessage(`{"model":{"layers":5}}`), nil
}

func TestPlanServiceInputAsksTheEngineWithTheRequest(t *testing.T) {
	eng := &planInputFake{}
	dev := 1
	raw, err := NewPlanService(context.Background(), eng).Input(PlanRequest{Ctx: 512, VRAMMB: 300, Device: &dev})
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"model":{"layers":5}}` || eng.got.Ctx != 512 || eng.got.VRAMMB != 300 || eng.got.Device == nil || *eng.got.Device != 1 {
		t.Fatalf("Input = %s with request %+v, want the engine's answer to ctx 512, pin 300 on device 1", raw, eng.got)
	}
}

func TestPlanServiceInputSaysSoWhenTheEngineCannotDescribeIt(t *testing.T) {
	_, err := NewPlanService(context.Background(), &fakeEngine{}).Input(PlanRequest{})
	if err == nil || !strings.Contains(err.Error(), "what-if") {
		t.Fatalf("Input on an engine without PlanInput: %v, want an error naming the what-if", err)
	}
}

var _ PlanInputEngine = (*planInputFake)(nil)
