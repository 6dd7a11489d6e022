#!/usr/bin/env node
/** The `kvindex` command line. Subcommands: `demo` (the default). */
import { runDemo } from './demo.js';

function main(argv: string[]): number {
  const [command = 'demo'] = argv;
  switch (command) {
    case 'demo':
      for (const line of runDemo()) process.stdout.write(line + '\n');
      return 0;
    case '--help':
    case 'help':
      process.stdout.write('usage: kvindex [demo]\n');
      return 0;
    default:
      process.stderr.write(`kvindex: unknown command '${command}' (try 'kvindex help')\n`);
      return 2;
  }
}

process.exitCode = main(process.argv.slice(2));
