package vulkan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/vkllm/vkllm/engine/config"
)

// The pipeline cache keeps what the driver compiled from our SPIR-V between processes, one
// file per GPU: without it every process start compiles each kernel again, which on the H200
// put 0.4-0.8 s of pipeline creation in front of an 8B model's first token. The driver
// ignores data from another driver build; we also discard files whose header names another
// device, so a stale or foreign file only costs the compile it would have cost anyway.

// pipelineCacheOff is the Options.PipelineCacheDir (or VKLLM_PIPELINE_CACHE) value that
// disables the cache.
const pipelineCacheOff = "off"

// pipelineCacheDir resolves where the cache lives: the option, else VKLLM_PIPELINE_CACHE,
// else the OS user cache dir; "" when disabled or no directory is known.
func pipelineCacheDir(opt string) string {
	dir := strings.TrimSpace(opt)
	if dir == "" {
		dir = strings.TrimSpace(config.PipelineCache.String())
	}
	if strings.EqualFold(dir, pipelineCacheOff) {
		return ""
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "vkllm")
	}
	return dir
}

// pipelineCacheFile is the cache file of this context's GPU inside dir.
func (c *Context) pipelineCacheFile(dir string) string {
	return filepath.Join(dir, "pipelines-"+strings.ReplaceAll(c.Info.Key(), ":", "-")+".bin")
}

// cacheHeaderOK reports whether data starts with a version-one pipeline cache header
// (VkPipelineCacheHeaderVersionOne: header size, version, vendor, device, cache UUID) naming
// this device.
func cacheHeaderOK(data []byte, vendor, device uint32, uuid [vk.UuidSize]byte) bool {
	if len(data) < 32 {
		return false
	}
	size := binary.LittleEndian.Uint32(data[0:])
	return size >= 32 && int(size) <= len(data) &&
		binary.LittleEndian.Uint32(data[4:]) == 1 &&
		binary.LittleEndian.Uint32(data[8:]) == vendor &&
		binary.LittleEndian.Uint32(data[12:]) == device &&
		bytes.Equal(data[16:32], uuid[:])
}

// openPipelineCache creates the context's VkPipelineCache, seeded from dir's file when that
// file belongs to this device. Failures cost speed, never the context: they are logged and the
// kernels compile without a cache.
func (c *Context) openPipelineCache(dir string) {
	if dir == "" {
		return
	}
	path := c.pipelineCacheFile(dir)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		slog.Warn("vulkan pipeline cache unreadable; kernels compile afresh", "path", path, "err", err)
	}
	var props vk.PhysicalDeviceProperties
	vk.GetPhysicalDeviceProperties(c.physical, &props)
	props.Deref()
	if len(data) > 0 && !cacheHeaderOK(data, props.VendorID, props.DeviceID, props.PipelineCacheUUID) {
		slog.Debug("vulkan pipeline cache from another device or driver build; starting empty", "path", path)
		data = nil
	}
	info := vk.PipelineCacheCreateInfo{SType: vk.StructureTypePipelineCacheCreateInfo}
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(data) > 0 {
		pin.Pin(&data[0])
		info.InitialDataSize = uint(len(data))
		info.PInitialData = unsafe.Pointer(&data[0])
	}
	var h vk.PipelineCache
	if r := vk.CreatePipelineCache(c.dev, &info, nil, &h); r != vk.Success {
		slog.Warn("vulkan pipeline cache not created; kernels compile without one", "path", path, "err", resultError(r))
		return
	}
	c.pcache, c.pcachePath, c.pcacheLoaded = h, path, len(data)
}

// closePipelineCache writes the cache back when this process compiled new pipelines into it
// (to a temporary file renamed over the old one, so a crash never leaves half a file), then
// destroys it.
func (c *Context) closePipelineCache() {
	if c.pcache == vk.NullPipelineCache {
		return
	}
	defer func() {
		vk.DestroyPipelineCache(c.dev, c.pcache, nil)
		c.pcache = vk.NullPipelineCache
	}()
	if !c.pcacheDirty {
		return
	}
	if err := c.savePipelineCache(); err != nil {
		slog.Warn("vulkan pipeline cache not saved; the next start compiles the kernels again",
			"path", c.pcachePath, "err", err, "remedy", "free disk space or set VKLLM_PIPELINE_CACHE to a writable directory (off disables it)")
	}
}

func (c *Context) savePipelineCache() error {
	var n uint
	if r := vk.GetPipelineCacheData(c.dev, c.pcache, &n, nil); r != vk.Success {
		return fmt.Errorf("size the pipeline cache: %w", resultError(r))
	}
	if n == 0 || int(n) == c.pcacheLoaded {
		return nil // nothing compiled beyond what the file held
	}
	buf := make([]byte, n)
	if r := vk.GetPipelineCacheData(c.dev, c.pcache, &n, unsafe.Pointer(&buf[0])); r != vk.Success {
		return fmt.Errorf("read the pipeline cache: %w", resultError(r))
	}
	buf = buf[:n]
	if err := os.MkdirAll(filepath.Dir(c.pcachePath), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.pcachePath), filepath.Base(c.pcachePath)+".*.tmp")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(buf); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), c.pcachePath); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	slog.Debug("vulkan pipeline cache saved", "path", c.pcachePath, "bytes", len(buf), "loaded_bytes", c.pcacheLoaded)
	return nil
}
