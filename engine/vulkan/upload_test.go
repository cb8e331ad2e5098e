package vulkan

import (
	"bytes"
	"math/rand"
	"testing"
)

// Batched uploads land where unbatched writes do: buffers of sizes below, at and across the
// staging halves (shrunk to 4 KiB so that one test fills and rotates them many times), a write
// at an offset over bytes written before the batch, a read in the middle of the batch (which
// drains it) and a second write over the same bytes. The buffers are treated as device-only
// memory (as on a discrete GPU; lavapipe maps all of its memory), so writes take the batch.
// Fails if a copy is lost, misplaced or reordered, or if writes bypass the batch.
func TestBatchedUploadsLandInOrder(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(prev uint64) { uploadHalfBytes = prev }(uploadHalfBytes)
	uploadHalfBytes = 4 << 10
	rng := rand.New(rand.NewSource(3))
	sizes := []int{1, 100, 4096, 4097, 9000, 12288, 33, 20000, 4095, 7}
	want := make([][]byte, len(sizes))
	bufs := make([]*Buffer, len(sizes))
	for i, n := range sizes {
		b, err := c.NewBuffer(uint64(n+16), false)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		b.host = false // through the staging, as device-local memory goes
		bufs[i] = b
		want[i] = make([]byte, n+16)
		rng.Read(want[i]) // what the buffer holds before the batch
		if err := b.Write(0, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginUploads(); err != nil {
		t.Fatal(err)
	}
	if err := c.BeginUploads(); err == nil {
		t.Fatal("a second BeginUploads inside a batch succeeded")
	}
	for i, n := range sizes {
		data := make([]byte, n)
		rng.Read(data)
		if err := bufs[i].Write(16, data); err != nil {
			t.Fatal(err)
		}
		copy(want[i][16:], data)
		if i == 0 && c.uploads.used == 0 {
			t.Fatal("a write inside the batch did not go through its staging")
		}
		if i == 4 { // a read drains what came before it
			got, err := bufs[3].Read(0, uint64(len(want[3])))
			if err != nil || !bytes.Equal(got, want[3]) {
				t.Fatalf("read inside the batch: err %v, bytes equal %v", err, bytes.Equal(got, want[3]))
			}
		}
	}
	over := make([]byte, 5000) // rewrites bytes an earlier batched copy wrote: the later wins
	rng.Read(over)
	if err := bufs[7].Write(100, over); err != nil {
		t.Fatal(err)
	}
	copy(want[7][100:], over)
	if err := c.EndUploads(); err != nil {
		t.Fatal(err)
	}
	for i := range bufs {
		got, err := bufs[i].Read(0, uint64(len(want[i])))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[i]) {
			first := 0
			for first < len(got) && got[first] == want[i][first] {
				first++
			}
			t.Fatalf("buffer %d (%d bytes written at 16): contents differ from byte %d", i, sizes[i], first)
		}
	}
}

// The resident driver uploads a model's weights in one batch, and leaves none open.
func TestResidentUploadsInOneBatch(t *testing.T) {
	c := ctxOrSkip(t)
	m := loadShared(t, "stories260K")
	before := c.uploadBatches
	r, err := NewResident(c, m, ResidentOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := c.uploadBatches - before; got != 1 || c.uploads != nil {
		t.Fatalf("NewResident ended %d upload batches (want 1), one still open: %v", got, c.uploads != nil)
	}
}
