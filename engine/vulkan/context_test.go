package vulkan

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	vk "github.com/vulkan-go/vulkan"
)

func TestFillKernelWritesEveryElement(t *testing.T) {
	c := ctxOrSkip(t)
	const n = 1000
	buf, err := c.NewBuffer(4*n, false)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	k, err := c.Kernel("fill", 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	s.Dispatch(k, Push(uint32(n), float32(0.5)), (n+63)/64, 1, 1, buf.All())
	// Replaying a recorded sequence must give the same result.
	for run := 0; run < 2; run++ {
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := buf.Read(0, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if got != 0.5+float32(i) {
			t.Fatalf("y[%d] = %v, want %v", i, got, 0.5+float32(i))
		}
	}
}

func TestBufferRoundTripsThroughStaging(t *testing.T) {
	c := ctxOrSkip(t)
	for _, host := range []bool{false, true} {
		buf, err := c.NewBuffer(4096, host)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 1000)
		for i := range data {
			data[i] = byte(i*7 + 3)
		}
		if err := buf.Write(96, data); err != nil {
			t.Fatal(err)
		}
		got, err := buf.Read(96, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for i := range data {
			if got[i] != data[i] {
				t.Fatalf("host=%v: byte %d = %d, want %d", host, i, got[i], data[i])
			}
		}
		if err := buf.Write(4000, data); err == nil {
			t.Fatalf("host=%v: write past the end succeeded", host)
		}
		// the typed reads copy once, straight into their slices, at an element offset
		f, err := buf.ReadF32(25, 3)
		if err != nil {
			t.Fatal(err)
		}
		u, err := buf.ReadU32(25, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i := range f {
			at := 4*(25+i) - 96
			want := uint32(data[at]) | uint32(data[at+1])<<8 | uint32(data[at+2])<<16 | uint32(data[at+3])<<24
			if math.Float32bits(f[i]) != want || u[i] != want {
				t.Fatalf("host=%v: element %d read as %#x and %#x, want %#x", host, 25+i, math.Float32bits(f[i]), u[i], want)
			}
		}
		if none, err := buf.ReadF32(10, 0); err != nil || len(none) != 0 {
			t.Fatalf("host=%v: an empty read gave %d values, %v", host, len(none), err)
		}
		if _, err := buf.ReadF32(1020, 8); err == nil {
			t.Fatalf("host=%v: a read past the end succeeded", host)
		}
		buf.Free()
	}
}

// BenchmarkReadLogits times a decode step's read of a 128256-token vocabulary's logits from
// their host-visible buffer (one copy into the returned slice).
func BenchmarkReadLogits(b *testing.B) {
	c := ctxOrSkip(b)
	const vocab = 128256
	buf, err := c.NewBuffer(4*vocab, true)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	b.ReportAllocs()
	b.SetBytes(4 * vocab)
	for i := 0; i < b.N; i++ {
		if _, err := buf.ReadF32(0, vocab); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBindingOverStorageRangeIsRefused(t *testing.T) {
	c := ctxOrSkip(t)
	k, err := c.Kernel("fill", 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := c.NewBuffer(1024, false)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	s, err := c.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	// A fake oversize range: the check must trip before Vulkan sees it.
	big := Binding{Buf: &Buffer{ctx: c, handle: buf.handle, Size: c.Info.MaxStorageBufferRange + 4}, Size: c.Info.MaxStorageBufferRange + 4}
	s.Dispatch(k, Push(uint32(1), float32(0)), 1, 1, 1, big)
	if err := s.End(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize binding: err %v, want ErrTooLarge", err)
	}
}

func TestBufferOverAllocationLimitIsRefused(t *testing.T) {
	c := ctxOrSkip(t)
	if _, err := c.NewBuffer(c.Info.MaxAllocationSize+4, false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("buffer over maxMemoryAllocationSize: err %v, want ErrTooLarge", err)
	}
}

// A negative control for the zero-validation-errors gate: a deliberately invalid call must
// be counted (then the count is restored so the run still ends clean).
func TestValidationMessengerCountsAnInvalidCall(t *testing.T) {
	c := ctxOrSkip(t)
	before, _, active := c.ValidationErrors()
	if !active {
		t.Skip("Khronos validation layer not installed (apt install vulkan-validationlayers)")
	}
	var h vk.Buffer
	// size 0 violates VUID-VkBufferCreateInfo-size-00912.
	r := vk.CreateBuffer(c.dev, &vk.BufferCreateInfo{
		SType: vk.StructureTypeBufferCreateInfo,
		Size:  0,
		Usage: vk.BufferUsageFlags(vk.BufferUsageStorageBufferBit),
	}, nil, &h)
	if r == vk.Success && h != vk.NullBuffer {
		vk.DestroyBuffer(c.dev, h, nil)
	}
	after, last, _ := c.ValidationErrors()
	setValidationErrors(before)
	if after <= before {
		t.Fatalf("invalid vkCreateBuffer not counted (errors %d -> %d)", before, after)
	}
	t.Logf("counted: %.120s", last)
}

func TestTimestampsTimeEachStampedSpan(t *testing.T) {
	c := ctxOrSkip(t)
	if c.timestampNs == 0 {
		t.Skip("the compute queue has no timestamps")
	}
	buf, err := c.NewBuffer(4*4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	k, err := c.Kernel("fill", 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	if err := s.EnableTimestamps(4); err != nil {
		t.Fatal(err)
	}
	s.Stamp("start")
	s.Dispatch(k, Push(uint32(4096), float32(1)), 64, 1, 1, buf.All())
	s.Stamp("fill")
	s.Barrier()
	s.Dispatch(k, Push(uint32(4096), float32(2)), 64, 1, 1, buf.All())
	s.Stamp("fill")
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	tm, err := s.Timings()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm) != 1 || tm["fill"] < 0 {
		t.Fatalf("timings %v, want one non-negative \"fill\" entry summing two spans", tm)
	}
}

// parallelCopy copies every byte whatever the length's split among workers: lengths around the
// piece size, uneven splits, and a destination longer than the source (its tail untouched).
func TestParallelCopyCopiesEveryByte(t *testing.T) {
	for _, n := range []int{0, 1, 4<<20 - 1, 8 << 20, 8<<20 + 3, 37<<20 + 11} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i>>13)
		}
		dst := make([]byte, n+5)
		for i := range dst {
			dst[i] = 0xee
		}
		parallelCopy(dst, src)
		for i := range src {
			if dst[i] != src[i] {
				t.Fatalf("length %d: byte %d is %#x, want %#x", n, i, dst[i], src[i])
			}
		}
		for i := n; i < len(dst); i++ {
			if dst[i] != 0xee {
				t.Fatalf("length %d: byte %d past the source written", n, i)
			}
		}
	}
}
