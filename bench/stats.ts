// Order statistics for the benchmark's latency samples.

/** Nearest-rank percentile (p in 0..100); NaN when there are no samples. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** The element whose key is the median of all keys (the lower middle for an even count). */
export function medianBy<T>(items: readonly T[], key: (item: T) => number): T {
  if (items.length === 0) throw new Error("medianBy of nothing");
  const sorted = [...items].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)] as T;
}
