package sample

import (
	"math"
	"strings"
	"testing"
)

func TestValidateNamesTheSettingOutOfRange(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name  string
		p     Params
		field string // "" = valid
	}{
		{"greedy zero value", Params{}, ""},
		{"typical sampling", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64}, ""},
		{"negative temperature", Params{Temperature: -1}, "temperature"},
		{"NaN temperature", Params{Temperature: nan}, "temperature"},
		{"negative top_k", Params{TopK: -1}, "top_k"},
		{"top_p above 1", Params{TopP: 1.5}, "top_p"},
		{"negative min_p", Params{MinP: -0.1}, "min_p"},
		{"negative repeat_penalty", Params{RepeatPenalty: -2}, "repeat_penalty"},
		{"negative repeat_last_n", Params{RepeatLastN: -5}, "repeat_last_n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.field+" ") {
				t.Fatalf("Validate: %v, want an error naming %s", err, c.field)
			}
		})
	}
}
