package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/vkllm/vkllm/engine/vulkan"
	// The Vulkan resident driver registers itself with engine.Load (run, chat, serve, bench).
	_ "github.com/vkllm/vkllm/engine/vulkan/backend"
)

func init() {
	register("devices", "list Vulkan devices (heaps, budget, limits, features) and the CPU", runDevices)
}

// cpuInfo is the CPU line of `vkllm devices`.
type cpuInfo struct {
	Model string `json:"model"`
	Cores int    `json:"cores"`
}

// devicesReport is the --json output.
type devicesReport struct {
	Vulkan      []vulkan.DeviceInfo `json:"vulkan"`
	VulkanError string              `json:"vulkan_error,omitempty"`
	Default     *int                `json:"default,omitempty"`
	CPU         cpuInfo             `json:"cpu"`
}

func readCPU() cpuInfo {
	info := cpuInfo{Model: runtime.GOARCH, Cores: runtime.NumCPU()}
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return info
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			info.Model = strings.TrimSpace(v)
			break
		}
	}
	return info
}

func runDevices(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("devices", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	device := fs.Int("device", -1, "mark this device index as the chosen one (default: VKLLM_DEVICE, else the best discrete GPU)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rep := devicesReport{CPU: readCPU()}
	devs, verr := vulkan.Devices()
	if verr == nil {
		rep.Vulkan = devs
		chosen, err := vulkan.ChooseDevice(devs, *device)
		if err != nil {
			return err
		}
		rep.Default = &chosen.Index
	} else {
		rep.VulkanError = verr.Error()
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printDevices(os.Stdout, rep)
	if verr != nil {
		return fmt.Errorf("list Vulkan devices: %w", verr)
	}
	return nil
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }

func printDevices(w io.Writer, rep devicesReport) {
	for _, d := range rep.Vulkan {
		mark := " "
		if rep.Default != nil && *rep.Default == d.Index {
			mark = "*"
		}
		fmt.Fprintf(w, "%s[%d] %s\n", mark, d.Index, d.Name)
		fmt.Fprintf(w, "    type %s, driver %s (%s), Vulkan %s, key %s\n", d.Type, d.DriverName, d.DriverInfo, d.APIVersion, d.Key())
		for i, h := range d.Heaps {
			local := "host"
			if h.DeviceLocal {
				local = "device-local"
			}
			room := "budget/usage not reported"
			if d.BudgetReported {
				room = fmt.Sprintf("budget %s, usage %s", mib(h.Budget), mib(h.Usage))
			}
			fmt.Fprintf(w, "    heap %d: %s %s, %s\n", i, mib(h.Size), local, room)
		}
		fmt.Fprintf(w, "    max storage range %s, max allocation %s, subgroup %d\n", mib(d.MaxStorageBufferRange), mib(d.MaxAllocationSize), d.SubgroupSize)
		fmt.Fprintf(w, "    features: %s\n", d.FeatureList())
	}
	fmt.Fprintf(w, "CPU: %s, %d cores\n", rep.CPU.Model, rep.CPU.Cores)
}
