package engine

import (
	"context"
	"strings"
	"testing"
)

func TestKVCacheTypeIsCheckedAgainstTheBackend(t *testing.T) {
	cases := []struct {
		kv      string
		backend Backend
		refuse  string // "" = accepted
	}{
		{"", BackendAuto, ""},
		{"f16", BackendGPU, ""},
		{"f16", BackendCPU, ""},
		{"f32", BackendCPU, ""},
		{"f32", BackendAuto, "CPU only"},
		{"f32", BackendGPU, "CPU only"},
		{"q8_0", BackendCPU, "unknown"},
	}
	for _, c := range cases {
		err := checkKV(c.kv, c.backend)
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("kv %q on %s: %v, want accepted", c.kv, c.backend, err)
		case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
			t.Errorf("kv %q on %s: %v, want a refusal saying %q", c.kv, c.backend, err, c.refuse)
		}
	}
}

func TestEmbeddedModelLoadsWithAnF32CacheOnTheCPU(t *testing.T) {
	e, err := Load(context.Background(), LoadOptions{Backend: BackendCPU, KV: "f32", DeviceIndex: -1, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Info().Backend != "cpu" || e.Info().Context != 64 {
		t.Fatalf("loaded %+v, want the CPU at context 64", e.Info())
	}
}
