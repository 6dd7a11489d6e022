/**
 * When each node was last stored, for the tree's pair budget (`maxPairs`): a counter stamped
 * on every node a Stored event reaches, so the least recently stored leaves go first. Without a
 * budget `touch` is a no-op chosen at construction, so stores do not branch on the option.
 * Recency is by store only: lookups from other threads read the tree without writing to it.
 */

export interface Recency {
  /** The node was stored (or re-stored) now. */
  touch(node: number): void;
  /** The node's last store, as a counter (higher is more recent). */
  stamp(node: number): number;
}

const NONE: Recency = { touch: () => {}, stamp: () => 0 };

class NodeStamps implements Recency {
  private stamps = new Float64Array(1024);
  private tick = 0;

  touch(node: number): void {
    if (node >= this.stamps.length) {
      const next = new Float64Array(Math.max(node + 1, this.stamps.length * 2));
      next.set(this.stamps);
      this.stamps = next;
    }
    this.stamps[node] = ++this.tick;
  }

  stamp(node: number): number {
    return this.stamps[node] ?? 0;
  }
}

/** A recency tracker when the tree has a budget, else the no-op. */
export function createRecency(enabled: boolean): Recency {
  return enabled ? new NodeStamps() : NONE;
}
