/**
 * The timed replay's event queue: a binary min-heap of (time, kind, arg) entries in parallel
 * arrays, ordered by time and then by insertion, so events due at the same time run in the
 * order they were queued (KV events of one engine stay in order; a tie never depends on the
 * heap's shape).
 */
export class EventQueue {
  #time: number[] = [];
  #order: number[] = [];
  #kind: number[] = [];
  #arg: number[] = [];
  #next = 0;

  /** Entries queued. */
  get size(): number {
    return this.#time.length;
  }

  /** Queues event (`kind`, `arg`) at `time`. */
  push(time: number, kind: number, arg: number): void {
    const order = this.#next++;
    let i = this.#time.length;
    this.#time.push(time);
    this.#order.push(order);
    this.#kind.push(kind);
    this.#arg.push(arg);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#less(time, order, p)) break;
      this.#move(p, i);
      i = p;
    }
    this.#set(i, time, order, kind, arg);
  }

  /** Time of the first entry. */
  topTime(): number {
    return this.#time[0]!;
  }

  /** Kind of the first entry. */
  topKind(): number {
    return this.#kind[0]!;
  }

  /** Argument of the first entry. */
  topArg(): number {
    return this.#arg[0]!;
  }

  /** Removes the first entry. */
  pop(): void {
    const last = this.#time.length - 1;
    const time = this.#time[last]!;
    const order = this.#order[last]!;
    const kind = this.#kind[last]!;
    const arg = this.#arg[last]!;
    this.#time.pop();
    this.#order.pop();
    this.#kind.pop();
    this.#arg.pop();
    if (last === 0) return;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= last) break;
      if (c + 1 < last && this.#less(this.#time[c + 1]!, this.#order[c + 1]!, c)) c++;
      if (!(this.#time[c]! < time || (this.#time[c]! === time && this.#order[c]! < order))) break;
      this.#move(c, i);
      i = c;
    }
    this.#set(i, time, order, kind, arg);
  }

  #less(time: number, order: number, j: number): boolean {
    const t = this.#time[j]!;
    return time < t || (time === t && order < this.#order[j]!);
  }

  #move(from: number, to: number): void {
    this.#set(to, this.#time[from]!, this.#order[from]!, this.#kind[from]!, this.#arg[from]!);
  }

  #set(i: number, time: number, order: number, kind: number, arg: number): void {
    this.#time[i] = time;
    this.#order[i] = order;
    this.#kind[i] = kind;
    this.#arg[i] = arg;
  }
}
