/**
 * Where a process's resident memory is, from /proc/self/smaps (Linux only; empty elsewhere).
 * Anonymous memory is grouped into regions (an rw mapping together with the inaccessible
 * reservation right after it) and summed by the region's reserved size: glibc's per-thread
 * malloc arenas are 64 MiB regions aligned to 64 MiB, growable SharedArrayBuffers reserve their
 * `maxByteLength` (array-store.ts: 1 GiB; worker tables 64 MiB), V8 heap pages are 256 KiB.
 */
import { readFileSync } from 'node:fs';

/** Regions of one reserved size: `<1` (V8 pages, small malloc maps), `NMiB`, or `64-rwNK`. */
export interface SmapsRegion { reserved: string; aligned64: boolean; count: number; rssMiB: number }

/** Resident MiB by kind: file-backed, the brk heap, stacks, and anonymous regions by size (>= 0.5 MiB). */
export function smapsSummary(): { fileMiB: number; brkMiB: number; stackMiB: number; regions: SmapsRegion[] } {
  let text: string;
  try {
    text = readFileSync('/proc/self/smaps', 'utf8');
  } catch {
    return { fileMiB: 0, brkMiB: 0, stackMiB: 0, regions: [] };
  }
  interface M { start: bigint; end: bigint; perms: string; path: string; rss: number }
  const maps: M[] = [];
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) {
      maps.push({ start: BigInt(`0x${head[1]}`), end: BigInt(`0x${head[2]}`), perms: head[3]!, path: head[4]!, rss: 0 });
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null) maps[maps.length - 1]!.rss = Number(rss[1]) * 1024;
  }
  const MiB = 1 << 20;
  let file = 0;
  let brk = 0;
  let stack = 0;
  const regions = new Map<string, SmapsRegion>();
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]!;
    if (m.path.startsWith('/')) { file += m.rss; continue; }
    if (m.path === '[heap]') { brk += m.rss; continue; }
    if (m.path.startsWith('[stack')) { stack += m.rss; continue; }
    if (m.path !== '' || m.perms.startsWith('---')) { if (m.rss > 0) add('other-named', m.rss); continue; }
    let end = m.end;
    const next = maps[i + 1];
    if (next !== undefined && next.start === m.end && next.perms.startsWith('---') && next.path === '') { end = next.end; i++; }
    const reserved = Number(end - m.start) / MiB;
    // 64 MiB regions are told apart by their rw part: a worker table's (worker-table.ts) is
    // the same in every table here, a malloc arena's is what the arena's heap has grown to.
    const key = Math.round(reserved) === 64
      ? `64-rw${Math.round(Number(m.end - m.start) / 65536) * 64}K|${m.start % (64n << 20n) === 0n}`
      : `${reserved >= 1 ? Math.round(reserved) : '<1'}|${m.start % (64n << 20n) === 0n}`;
    add(key, m.rss);
  }
  function add(key: string, rss: number): void {
    let r = regions.get(key);
    if (r === undefined) {
      const [size, al] = key.split('|');
      r = { reserved: size === 'other-named' || size === '<1' || size!.startsWith('64-') ? size! : `${size}MiB`, aligned64: al === 'true', count: 0, rssMiB: 0 };
      regions.set(key, r);
    }
    r.count++;
    r.rssMiB += rss / MiB;
  }
  const list = [...regions.values()].filter((r) => r.rssMiB >= 0.5).sort((a, b) => b.rssMiB - a.rssMiB);
  for (const r of list) r.rssMiB = Math.round(r.rssMiB * 10) / 10;
  return { fileMiB: Math.round(file / MiB), brkMiB: Math.round(brk / MiB), stackMiB: Math.round(stack / MiB), regions: list };
}
