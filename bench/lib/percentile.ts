/** The `p`-th percentile (0–100) of `samples` (nearest rank); NaN for no samples. */
export const percentile = (samples: readonly number[], p: number): number =>
  [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor((p / 100) * samples.length))] ??
  NaN
