package plan

import "fmt"

// SpillWarning checks the heap after warm-up, when every resident buffer exists and has been
// touched: budget and usage are re-read from VK_EXT_memory_budget into after. When the heap's
// usage is past its budget, the driver or the OS has moved memory off the GPU (WDDM demotes it
// to system memory; some drivers do so silently) and decode slows, so it returns the one warning
// the caller logs once, with a smaller pin as the remedy. Without a report nothing can be told
// and it returns false.
func SpillWarning(p Plan, after Device) (string, bool) {
	if !after.BudgetReported || after.BudgetBytes <= 0 || after.UsageBytes <= after.BudgetBytes {
		return "", false
	}
	over := after.UsageBytes - after.BudgetBytes
	suggest := MBDown(p.UsableBytes - over - BudgetMargin(after.BudgetBytes))
	remedy := "VKLLM_GPU_VRAM_MB=<MiB> pins a smaller cap"
	if suggest > 0 {
		remedy = fmt.Sprintf("VKLLM_GPU_VRAM_MB=%d pins a cap that leaves the margin free", suggest)
	}
	return fmt.Sprintf("resident driver spilled - after warm-up the heap uses %d MB of a %d MB budget, %d MB past it, so part of the model may sit in system memory and decode slows; %s",
		MBUp(after.UsageBytes), MBDown(after.BudgetBytes), MBUp(over), remedy), true
}
