// Number and date formats the panels share.

export function formatParams(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(0)}K`;
  return String(n);
}

export function formatBytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(2)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(0)} KiB`;
  return `${n} B`;
}

// formatWhen is a short local date: "11-30 17:53" this year, "2025-11-30" before it.
export function formatWhen(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, "0");
  const day = `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  if (d.getFullYear() !== new Date().getFullYear()) return `${d.getFullYear()}-${day}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
