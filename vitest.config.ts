import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Vitest's default is one worker per core minus one: a single worker on this 2-core host,
    // so every file ran serially while most of them wait on child processes and sockets. Two
    // workers overlap that waiting; the whole suite passed with two workers at load average 16.
    maxWorkers: 2,
  },
});
