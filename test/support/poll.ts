/**
 * Polling for an asynchronous effect instead of sleeping a fixed time and hoping it came: a
 * fixed sleep passes on an idle host and fails on a loaded one (CI shares 2 cores with other
 * jobs; a timer or a thread can be late by tens of ms), while a poll with a generous deadline
 * returns as soon as the effect is there and fails only if it never comes.
 */

/** Polls `cond` every `everyMs` until it is true; throws naming `what` after `timeoutMs`. */
export async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 15_000, everyMs = 5): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!(await cond())) {
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
