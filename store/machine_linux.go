package store

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// osFacts reads the kernel release, distribution, CPU model and RAM from /proc and /etc.
func osFacts(m *Machine) {
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if v := keyedLine("/etc/os-release", "PRETTY_NAME="); v != "" {
		m.OS += " " + strings.Trim(v, `"`)
	}
	if v := keyedLine("/proc/cpuinfo", "model name"); v != "" {
		m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
	}
	if v := keyedLine("/proc/meminfo", "MemTotal:"); v != "" {
		f := strings.Fields(v) // "16318936 kB"
		if len(f) >= 1 {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				m.RAMBytes = kb * 1024
			}
		}
	}
}

// keyedLine returns the rest of the first line of path that starts with prefix.
func keyedLine(path, prefix string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(line, prefix))
		}
	}
	return ""
}
