package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

func init() {
	register("pin", "pin the usable VRAM of a GPU on this machine for the resident plan: pin set|list|clear", runPin)
}

const pinUsage = `usage:
  vkllm pin set [--device N] --mb M    pin device N's usable VRAM to M MiB (default device: the one the plan uses)
  vkllm pin list                       list this machine's pins
  vkllm pin clear [--device N | --key KEY | --all]
VKLLM_GPU_VRAM_MB, when set, overrides every stored pin.`

func runPin(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: pin needs a subcommand\n%s", errUsage, pinUsage)
	}
	switch args[0] {
	case "set":
		return runPinSet(ctx, args[1:], os.Stdout)
	case "list":
		return runPinList(ctx, args[1:], os.Stdout)
	case "clear":
		return runPinClear(ctx, args[1:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Fprintln(os.Stderr, pinUsage)
		return flag.ErrHelp
	}
	return fmt.Errorf("%w: unknown pin subcommand %q\n%s", errUsage, args[0], pinUsage)
}

func pinFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("pin "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}

func parsePinFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q\n%s", errUsage, fs.Arg(0), pinUsage)
	}
	return nil
}

// pinDevice finds the device a pin command names (index -1: the plan's default choice).
func pinDevice(index int) (vulkan.DeviceInfo, error) {
	devs, err := vulkan.Devices()
	if err == nil && len(devs) == 0 {
		err = vulkan.ErrNoDevice
	}
	if err != nil {
		return vulkan.DeviceInfo{}, fmt.Errorf("find the GPU to pin: %w", err)
	}
	return vulkan.ChooseDevice(devs, index)
}

// envOverrideNote says when VKLLM_GPU_VRAM_MB overrides stored pins.
func envOverrideNote(w io.Writer) {
	if config.GPUVRAMMB.Set() {
		fmt.Fprintf(w, "note: %s=%s is set and overrides every stored pin (unset it to use them)\n", config.GPUVRAMMB.Name, config.GPUVRAMMB.Raw())
	}
}

func runPinSet(ctx context.Context, args []string, w io.Writer) error {
	fs := pinFlagSet("set")
	index := fs.Int("device", -1, "Vulkan device index (default: VKLLM_DEVICE, else the best discrete GPU)")
	mb := fs.Int("mb", 0, "usable VRAM in MiB")
	if err := parsePinFlags(fs, args); err != nil {
		return err
	}
	if *mb <= 0 {
		return fmt.Errorf("%w: pin set needs --mb M, the usable VRAM in MiB (a positive number); to remove a pin use vkllm pin clear", errUsage)
	}
	d, err := pinDevice(*index)
	if err != nil {
		return err
	}
	dev := planinput.DeviceOf(d)
	if err := checkPinFits(*mb, dev, "pin"); err != nil {
		return err
	}
	st, err := store.Open("")
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.SetPin(ctx, dev.Key, *mb); err != nil {
		return err
	}
	fmt.Fprintf(w, "pinned device %d (%s, %s) at %d MB of its %d MB heap\n", d.Index, d.Name, dev.Key, *mb, plan.MBDown(dev.HeapBytes))
	envOverrideNote(w)
	return nil
}

func runPinList(ctx context.Context, args []string, w io.Writer) error {
	fs := pinFlagSet("list")
	if err := parsePinFlags(fs, args); err != nil {
		return err
	}
	st, err := store.Open("")
	if err != nil {
		return err
	}
	defer st.Close()
	pins, err := st.ListPins(ctx)
	if err != nil {
		return err
	}
	names := map[string]string{}
	if devs, err := vulkan.Devices(); err == nil {
		for _, d := range devs {
			names[d.Key()] = fmt.Sprintf("device %d (%s)", d.Index, d.Name)
		}
	}
	if len(pins) == 0 {
		fmt.Fprintln(w, "no pins on this machine (vkllm pin set --device N --mb M adds one)")
	}
	for _, p := range pins {
		name := names[p.DeviceKey]
		if name == "" {
			name = "not present now"
		}
		fmt.Fprintf(w, "%-40s %6d MB  %s  set %s\n", p.DeviceKey, p.MB, name, time.UnixMilli(p.UpdatedAtMs).UTC().Format(time.RFC3339))
	}
	envOverrideNote(w)
	return nil
}

func runPinClear(ctx context.Context, args []string, w io.Writer) error {
	fs := pinFlagSet("clear")
	index := fs.Int("device", -1, "Vulkan device index (default: VKLLM_DEVICE, else the best discrete GPU)")
	key := fs.String("key", "", "clear the pin stored under this device key (see vkllm pin list), e.g. for a GPU no longer present")
	all := fs.Bool("all", false, "clear every pin on this machine")
	if err := parsePinFlags(fs, args); err != nil {
		return err
	}
	if *all && *key != "" {
		return fmt.Errorf("%w: give --all or --key, not both", errUsage)
	}
	st, err := store.Open("")
	if err != nil {
		return err
	}
	defer st.Close()
	var keys []string
	switch {
	case *all:
		pins, err := st.ListPins(ctx)
		if err != nil {
			return err
		}
		for _, p := range pins {
			keys = append(keys, p.DeviceKey)
		}
	case *key != "":
		keys = []string{*key}
	default:
		d, err := pinDevice(*index)
		if err != nil {
			return fmt.Errorf("%w (to clear a pin by its key, use vkllm pin clear --key KEY)", err)
		}
		keys = []string{d.Key()}
	}
	for _, k := range keys {
		mb, ok, err := st.Pin(ctx, k)
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintf(w, "no pin stored for %s (vkllm pin list shows the stored ones)\n", k)
			continue
		}
		if err := st.ClearPin(ctx, k); err != nil {
			return err
		}
		fmt.Fprintf(w, "cleared the %d MB pin for %s\n", mb, k)
	}
	if len(keys) == 0 {
		fmt.Fprintln(w, "no pins to clear")
	}
	envOverrideNote(w)
	return nil
}
