/** `kvindex demo`: prints the demo of `demo.ts`. */
import { runDemo } from './demo.js';

export async function main(args: string[]): Promise<number> {
  if (args.includes('--help')) {
    process.stdout.write('usage: kvindex demo\n  indexes the events of two workers sharing a prompt and prints the scores\n');
    return 0;
  }
  for (const line of runDemo()) process.stdout.write(line + '\n');
  return 0;
}
