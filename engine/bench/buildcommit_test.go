package bench

import "testing"

// go test stamps no VCS facts, as GOFLAGS=-buildvcs=false builds do not: the commit the
// Makefile links in is what the history records then.
func TestBuildCommitFallsBackToTheLinkedCommit(t *testing.T) {
	prev := linkedCommit
	t.Cleanup(func() { linkedCommit = prev })
	for _, c := range []string{"", "0b371681", "0b371681+dirty"} {
		linkedCommit = c
		if got := BuildCommit(); got != c {
			t.Errorf("linked %q: BuildCommit() = %q", c, got)
		}
	}
}
