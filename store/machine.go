package store

import (
	"context"
	"database/sql"
	"os"
	"runtime"
)

// Machine is one computer vkllm ran on.
type Machine struct {
	ID       int64  `json:"id"`
	Hostname string `json:"hostname"`
	OS       string `json:"os"`     // e.g. "linux/amd64 Debian GNU/Linux 13"
	Kernel   string `json:"kernel"` // e.g. "6.12.0-1-amd64"
	CPU      string `json:"cpu"`    // model name
	RAMBytes int64  `json:"ram_bytes"`
}

// LocalMachine describes the computer this process runs on, as far as the OS tells us cheaply.
func LocalMachine() Machine {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	m := Machine{Hostname: host, OS: runtime.GOOS + "/" + runtime.GOARCH}
	osFacts(&m)
	return m
}

// UpsertMachine records a machine by hostname and returns its id.
func (s *Store) UpsertMachine(ctx context.Context, m Machine) (int64, error) {
	var id int64
	err := s.tx(ctx, "save machine "+m.Hostname, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO machines(hostname, os, kernel, cpu, ram_bytes, updated_at_ms)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT(hostname) DO UPDATE SET os=excluded.os, kernel=excluded.kernel, cpu=excluded.cpu,
				ram_bytes=excluded.ram_bytes, updated_at_ms=excluded.updated_at_ms
			RETURNING id`, m.Hostname, m.OS, m.Kernel, m.CPU, m.RAMBytes, nowMs()).Scan(&id)
	})
	return id, err
}

// Machines lists every machine recorded, by hostname.
func (s *Store) Machines(ctx context.Context) ([]Machine, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, hostname, os, kernel, cpu, ram_bytes FROM machines ORDER BY hostname")
	if err != nil {
		return nil, s.fail("list machines", err)
	}
	defer rows.Close()
	var out []Machine
	for rows.Next() {
		var m Machine
		if err := rows.Scan(&m.ID, &m.Hostname, &m.OS, &m.Kernel, &m.CPU, &m.RAMBytes); err != nil {
			return nil, s.fail("list machines", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list machines", err)
	}
	return out, nil
}
