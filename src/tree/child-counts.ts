/**
 * Exact child counts of the tree's nodes, for its writer: whether a node has children (detach,
 * the pair budget) and how many (its 2-bit child class in the node record, node-store.ts). One
 * byte a node, since sibling links went there is no list to count; a count past 254 lives in a
 * Map (nodes with that many children are rare: the end of a system prompt that thousands of
 * conversations continue, 486 children on the conversation tree's replicas).
 */
import { LOCAL_STORE, type ArrayStore } from './array-store.js';

export class ChildCounts {
  /** Count per node, 255 = see `many`. */
  private bytes: Uint8Array;
  /** Counts of 255 or more (nodes whose byte is 255). */
  private readonly many = new Map<number, number>();

  constructor(capacity: number, private readonly store: ArrayStore = LOCAL_STORE) {
    this.bytes = store.uint8(capacity);
  }

  /** Bytes a node (the Map's entries are not counted: a few nodes in a million). */
  static readonly BYTES = 1;

  get capacity(): number {
    return this.bytes.length;
  }

  /** Nodes whose count is 255 or more. */
  get manyCount(): number {
    return this.many.size;
  }

  grow(capacity: number): void {
    this.bytes = this.store.growUint8(this.bytes, capacity);
  }

  /** A fresh node: no child. */
  reset(id: number): void {
    this.bytes[id] = 0;
  }

  get(id: number): number {
    const k = this.bytes[id]!;
    return k === 255 ? this.many.get(id)! : k;
  }

  has(id: number): boolean {
    return this.bytes[id] !== 0;
  }

  /** Counts a child in; returns the new count, capped at 255 (all a child class needs). */
  add(id: number): number {
    const k = this.bytes[id]!;
    if (k < 254) {
      this.bytes[id] = k + 1;
      return k + 1;
    }
    this.many.set(id, k === 254 ? 255 : this.many.get(id)! + 1);
    this.bytes[id] = 255;
    return 255;
  }

  /** Counts a child out; returns the new count, capped at 255. */
  remove(id: number): number {
    const k = this.bytes[id]!;
    if (k !== 255) {
      this.bytes[id] = k - 1;
      return k - 1;
    }
    const c = this.many.get(id)! - 1;
    if (c >= 255) {
      this.many.set(id, c);
      return 255;
    }
    this.many.delete(id);
    this.bytes[id] = c;
    return c;
  }
}
