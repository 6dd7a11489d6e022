/** Locating ../shared (the workloads) for tests; tests that need it skip with a message if absent. */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const SHARED = fileURLToPath(new URL('../../../shared', import.meta.url));

/** Path of a shared workload, or null (and a console note saying why the test skips). */
export function sharedWorkload(name: string): string | null {
  const p = `${SHARED}/workloads/${name}.jsonl.gz`;
  if (existsSync(p)) return p;
  console.warn(`skipping: ${p} is absent (CI provides ../shared)`);
  return null;
}
