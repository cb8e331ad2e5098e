package vulkan

import "log/slog"

// DeviceNow re-reads the facts of the context's own device — the heaps' VK_EXT_memory_budget
// budget and usage above all — through the instance the context already holds: a few property
// queries, no new instance, so it is cheap enough to run right after warm-up.
func (c *Context) DeviceNow() (DeviceInfo, error) {
	d, err := queryDevice(c.inst.handle, c.physical)
	if err != nil {
		return DeviceInfo{}, err
	}
	d.Index = c.Info.Index
	return d, nil
}

// warmedUp runs a runner's AfterWarmup hook with the device re-read, once the first decode
// pass has run.
func warmedUp(c *Context, hook func(after DeviceInfo)) {
	if hook == nil {
		return
	}
	d, err := c.DeviceNow()
	if err != nil {
		slog.Debug("re-read device memory after warm-up", "err", err)
		return
	}
	hook(d)
}
