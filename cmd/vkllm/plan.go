package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

func init() {
	register("plan", "decide whether a model fits resident on the GPU, at which context, or how it splits (nothing is uploaded)", runPlan)
}

// planFlags are `vkllm plan`'s flags.
type planFlags struct {
	model      string
	ctx        int
	vramMB     int
	device     int
	asJSON     bool
	strict     bool
	heapMB     int
	budgetMB   int
	usageMB    int
	wddm       bool
	rangeMB    int
	setFlags   map[string]bool
	whatIfUsed bool
}

func parsePlanFlags(args []string, stderr io.Writer) (*planFlags, error) {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &planFlags{}
	fs.StringVar(&f.model, "m", "", "GGUF model file (default: the embedded stories260K model)")
	fs.IntVar(&f.ctx, "ctx", 0, "requested context (default: the model's context length)")
	fs.IntVar(&f.vramMB, "vram-mb", 0, "pin the usable VRAM in MiB for this plan (over VKLLM_GPU_VRAM_MB and the stored pin)")
	fs.IntVar(&f.device, "device", -1, "Vulkan device index (default: VKLLM_DEVICE, else the best discrete GPU)")
	fs.BoolVar(&f.asJSON, "json", false, "print the plan as JSON")
	fs.BoolVar(&f.strict, "ctx-strict", false, "decline instead of shrinking the context")
	fs.IntVar(&f.heapMB, "assume-heap-mb", 0, "what-if: plan for a device with this largest device-local heap in MiB (no Vulkan device needed)")
	fs.IntVar(&f.budgetMB, "assume-budget-mb", 0, "what-if: the driver reports this memory budget in MiB (omitted: nothing reports)")
	fs.IntVar(&f.usageMB, "assume-usage-mb", 0, "what-if: the driver reports this memory usage in MiB (with --assume-budget-mb)")
	fs.BoolVar(&f.wddm, "assume-wddm", false, "what-if: the device runs under Windows WDDM")
	fs.IntVar(&f.rangeMB, "assume-storage-range-mb", 0, "what-if: maxStorageBufferRange in MiB (a 32-bit limit: 4096 and more mean 4 GiB - 1; omitted: no binding cap)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q (the model goes after -m)", errUsage, fs.Arg(0))
	}
	f.setFlags = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.setFlags[fl.Name] = true })
	for _, n := range []string{"assume-heap-mb", "assume-budget-mb", "assume-usage-mb", "assume-wddm", "assume-storage-range-mb"} {
		f.whatIfUsed = f.whatIfUsed || f.setFlags[n]
	}
	return f, f.check()
}

func (f *planFlags) check() error {
	switch {
	case f.ctx < 0:
		return fmt.Errorf("%w: --ctx %d: give a positive context, or omit it for the model's own", errUsage, f.ctx)
	case f.setFlags["vram-mb"] && f.vramMB <= 0:
		return fmt.Errorf("%w: --vram-mb %d: give the usable VRAM as a positive number of MiB", errUsage, f.vramMB)
	case f.whatIfUsed && f.heapMB <= 0:
		return fmt.Errorf("%w: what-if flags need --assume-heap-mb N, the device's largest heap in MiB", errUsage)
	case f.setFlags["assume-usage-mb"] && !f.setFlags["assume-budget-mb"]:
		return fmt.Errorf("%w: --assume-usage-mb needs --assume-budget-mb: a driver reports both or neither", errUsage)
	case f.budgetMB < 0 || f.usageMB < 0 || f.rangeMB < 0:
		return fmt.Errorf("%w: the --assume-* sizes must be positive MiB figures", errUsage)
	case f.setFlags["assume-budget-mb"] && f.budgetMB > f.heapMB:
		return fmt.Errorf("%w: --assume-budget-mb %d is larger than --assume-heap-mb %d; a budget is at most its heap", errUsage, f.budgetMB, f.heapMB)
	}
	return nil
}

// whatIfDevice is the device the --assume-* flags describe.
func (f *planFlags) whatIfDevice() plan.Device {
	d := plan.Device{Index: -1, Name: "what-if device", HeapBytes: int64(f.heapMB) * plan.MiB, WDDM: f.wddm, Assumed: true}
	if f.setFlags["assume-budget-mb"] {
		d.BudgetReported, d.BudgetBytes, d.UsageBytes = true, int64(f.budgetMB)*plan.MiB, int64(f.usageMB)*plan.MiB
	}
	if f.rangeMB > 0 {
		// maxStorageBufferRange is a 32-bit limit: 4096 MiB and more is what drivers report as 2^32 - 1
		d.MaxStorageBufferRange = min(int64(f.rangeMB)*plan.MiB, 1<<32-1)
	}
	return d
}

func runPlan(ctx context.Context, args []string) error {
	f, err := parsePlanFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	p, notes, err := makePlan(ctx, f)
	if err != nil {
		return err
	}
	return printPlan(os.Stdout, f.asJSON, p, notes)
}

// makePlan opens the model, settles the device and the pin, and computes the plan. notes are
// lines for the human output (what overrides what).
func makePlan(ctx context.Context, f *planFlags) (plan.Plan, []string, error) {
	file, err := openPlanModel(f.model)
	if err != nil {
		return plan.Plan{}, nil, err
	}
	defer file.Close()

	var notes []string
	var dev plan.Device
	var pin plan.Pin
	if f.whatIfUsed {
		dev = f.whatIfDevice()
		if f.vramMB > 0 {
			pin = plan.Pin{MB: f.vramMB, Source: plan.PinFlag}
		}
		if config.GPUVRAMMB.Set() {
			notes = append(notes, fmt.Sprintf("%s=%s is ignored: the what-if device is not this machine's GPU (use --vram-mb to pin it)", config.GPUVRAMMB.Name, config.GPUVRAMMB.Raw()))
		}
	} else {
		devs, err := vulkan.Devices()
		if err == nil && len(devs) == 0 {
			err = vulkan.ErrNoDevice
		}
		if err != nil {
			return plan.Plan{}, nil, fmt.Errorf("no Vulkan device to plan for: %w; describe one instead with --assume-heap-mb N (and --assume-budget-mb B --assume-usage-mb U, --assume-wddm, --assume-storage-range-mb R)", err)
		}
		vd, err := vulkan.ChooseDevice(devs, f.device)
		if err != nil {
			return plan.Plan{}, nil, err
		}
		dev = planinput.DeviceOf(vd)
		stored := store.StoredPinMB(ctx, dev.Key)
		pin = planinput.PinOf(f.vramMB, stored)
	}
	if f.vramMB > 0 {
		if err := checkPinFits(f.vramMB, dev, "--vram-mb"); err != nil {
			return plan.Plan{}, nil, err
		}
	}
	in, err := planinput.Input(file, dev, pin, planinput.Ctx(f.ctx, f.strict))
	if err != nil {
		return plan.Plan{}, nil, err
	}
	if f.model == "" {
		in.Model.Name = embedded.Name + " (embedded)"
	}
	if in.ForceSplit {
		notes = append(notes, config.GPUResident.Name+"=0 forces the partial offload")
	}
	return plan.Compute(in), notes, nil
}

// openPlanModel opens the model file, or the embedded model for "".
func openPlanModel(path string) (*gguf.File, error) {
	if path == "" {
		f, err := gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
		if err != nil {
			return nil, fmt.Errorf("open the embedded model: %w", err)
		}
		return f, nil
	}
	// The plan reads only the header: a header-only file or a download cut short plans as well.
	f, err := gguf.OpenHeader(path)
	if err != nil {
		return nil, fmt.Errorf("open model %s: %w", path, err)
	}
	f.ShapesOnly()
	return f, nil
}

// checkPinFits refuses a pin that is not positive or larger than the device's heap.
func checkPinFits(mb int, dev plan.Device, what string) error {
	if mb <= 0 {
		return fmt.Errorf("%s %d: a pin is the usable VRAM in MiB and must be positive (to plan from the device, drop the pin)", what, mb)
	}
	heap := plan.MBDown(dev.HeapBytes)
	if dev.HeapBytes > 0 && int64(mb) > heap {
		return fmt.Errorf("%s %d MB is larger than %s's largest device-local heap of %d MB: the model would spill to system memory; pin at most %d", what, mb, deviceLabel(dev), heap, heap)
	}
	return nil
}

func deviceLabel(d plan.Device) string {
	if d.Assumed || d.Index < 0 {
		return "the device"
	}
	return fmt.Sprintf("device %d (%s)", d.Index, d.Name)
}

func printPlan(w io.Writer, asJSON bool, p plan.Plan, notes []string) error {
	if asJSON {
		b, err := p.JSON()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if _, err := io.WriteString(w, p.Breakdown()); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintf(w, "%-9s %s\n", "note", n); err != nil {
			return err
		}
	}
	return nil
}
