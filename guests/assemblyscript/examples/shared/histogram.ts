// The histogram both histogram examples compute, for any element type.
import { View } from "../../assembly";

/**
 * counts[i] = #{v : edges[i] <= v < edges[i+1]}, the last bin open-ended;
 * values below edges[0] and NaNs are not counted. edges is ascending.
 */
export function histogram<T>(values: View<T>, edges: View<T>, counts: View<i64>): void {
  const bins = edges.length;
  for (let i = 0; i < bins; i++) counts[i] = 0;
  for (let i = 0, n = values.length; i < n; i++) {
    const v = values[i];
    if (v != v || bins == 0 || v < edges[0]) continue; // NaN, or below every bin
    // The last bin whose lower edge is <= v: edges[lo] <= v < edges[hi].
    let lo = 0, hi = bins;
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (edges[mid] <= v) lo = mid;
      else hi = mid;
    }
    counts[lo] += 1;
  }
}
