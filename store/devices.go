package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
)

// GPU is one Vulkan device vkllm has seen, keyed by vulkan.DeviceInfo.Key() ("vvvv:dddd:<uuid>").
type GPU struct {
	Key        string `json:"key"`
	VendorID   uint32 `json:"vendor_id"`
	DeviceID   uint32 `json:"device_id"`
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	DriverName string `json:"driver_name"`
	DriverInfo string `json:"driver_info"` // the driver's version string
	APIVersion string `json:"api_version"` // Vulkan API version, e.g. "1.3.280"
}

// Pin is a user-set usable-VRAM figure for one GPU on the local machine.
type Pin struct {
	DeviceKey   string `json:"device_key"`
	MB          int    `json:"mb"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
}

// UpsertGPU records a GPU's facts under its key.
func (s *Store) UpsertGPU(ctx context.Context, g GPU) error {
	if g.Key == "" {
		return fmt.Errorf("save gpu %q: empty key (use vulkan.DeviceInfo.Key())", g.Name)
	}
	return s.tx(ctx, "save gpu "+g.Key, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO gpus(key, vendor_id, device_id, uuid, name, driver_name, driver_info, api_version, updated_at_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(key) DO UPDATE SET vendor_id=excluded.vendor_id, device_id=excluded.device_id, uuid=excluded.uuid,
				name=excluded.name, driver_name=excluded.driver_name, driver_info=excluded.driver_info,
				api_version=excluded.api_version, updated_at_ms=excluded.updated_at_ms`,
			g.Key, g.VendorID, g.DeviceID, g.UUID, g.Name, g.DriverName, g.DriverInfo, g.APIVersion, nowMs())
		return err
	})
}

// GPUs lists every GPU recorded, by key.
func (s *Store) GPUs(ctx context.Context) ([]GPU, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT key, vendor_id, device_id, uuid, name, driver_name, driver_info, api_version FROM gpus ORDER BY key")
	if err != nil {
		return nil, s.fail("list gpus", err)
	}
	defer rows.Close()
	var out []GPU
	for rows.Next() {
		var g GPU
		if err := rows.Scan(&g.Key, &g.VendorID, &g.DeviceID, &g.UUID, &g.Name, &g.DriverName, &g.DriverInfo, &g.APIVersion); err != nil {
			return nil, s.fail("list gpus", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list gpus", err)
	}
	return out, nil
}

// SetPin pins the usable VRAM of one GPU on this machine to mb MiB (VKLLM_GPU_VRAM_MB still wins).
func (s *Store) SetPin(ctx context.Context, deviceKey string, mb int) error {
	if deviceKey == "" {
		return errors.New("set vram pin: empty device key")
	}
	if mb <= 0 {
		return fmt.Errorf("set vram pin for %s: %d MiB is not a usable amount (give a positive number, or clear the pin)", deviceKey, mb)
	}
	return s.tx(ctx, "set vram pin for "+deviceKey, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO vram_pins(machine_id, gpu_key, mb, updated_at_ms) VALUES (?, ?, ?, ?)
			ON CONFLICT(machine_id, gpu_key) DO UPDATE SET mb=excluded.mb, updated_at_ms=excluded.updated_at_ms`,
			s.machineID, deviceKey, mb, nowMs())
		return err
	})
}

// Pin returns the pinned VRAM of one GPU on this machine; ok is false when none is set.
func (s *Store) Pin(ctx context.Context, deviceKey string) (mb int, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT mb FROM vram_pins WHERE machine_id = ? AND gpu_key = ?", s.machineID, deviceKey).Scan(&mb)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.fail("read vram pin for "+deviceKey, err)
	}
	return mb, true, nil
}

// ListPins lists this machine's pins by device key.
func (s *Store) ListPins(ctx context.Context) ([]Pin, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT gpu_key, mb, updated_at_ms FROM vram_pins WHERE machine_id = ? ORDER BY gpu_key", s.machineID)
	if err != nil {
		return nil, s.fail("list vram pins", err)
	}
	defer rows.Close()
	var out []Pin
	for rows.Next() {
		var p Pin
		if err := rows.Scan(&p.DeviceKey, &p.MB, &p.UpdatedAtMs); err != nil {
			return nil, s.fail("list vram pins", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list vram pins", err)
	}
	return out, nil
}

// ClearPin removes the pin of one GPU on this machine; clearing a missing pin is not an error.
func (s *Store) ClearPin(ctx context.Context, deviceKey string) error {
	return s.tx(ctx, "clear vram pin for "+deviceKey, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM vram_pins WHERE machine_id = ? AND gpu_key = ?", s.machineID, deviceKey)
		return err
	})
}

// StoredPinMB reads this machine's pin for one GPU from the default store (VKLLM_DATA_DIR or the
// user data dir), 0 when none is set. A store that cannot be opened or read costs only the pin,
// never the caller's plan: it logs why and returns 0. It fits engine.LoadOptions.StoredPinMB.
func StoredPinMB(ctx context.Context, deviceKey string) int {
	if deviceKey == "" {
		return 0
	}
	st, err := Open("")
	if err != nil {
		slog.Warn("planning without the stored VRAM pin", "err", err)
		return 0
	}
	defer st.Close()
	mb, ok, err := st.Pin(ctx, deviceKey)
	if err != nil {
		slog.Warn("planning without the stored VRAM pin", "err", err)
		return 0
	}
	if !ok {
		return 0
	}
	return mb
}
