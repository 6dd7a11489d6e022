#!/usr/bin/env node
/**
 * The `kvindex` command line. Each subcommand lives in its own module exporting
 * `main(args: string[]): Promise<number>` (the exit code), loaded on demand.
 */
import { readFileSync } from 'node:fs';

const COMMANDS: Record<string, () => Promise<{ main(args: string[]): Promise<number> }>> = {
  demo: () => import('./demo-command.js'),
  fleet: () => import('./fleet.js'),
  gateway: () => import('./gateway.js'),
  replay: () => import('./replay.js'),
  serve: () => import('./serve.js'),
};

const USAGE = `usage: kvindex <command> [options]
  replay <file> [options]   replay a trace, recorded KV events or a workload through the indexer
  serve [options]           consume KV events from NATS JetStream and serve lookups
  serve --http <[host:]port>  standalone indexer: vLLM/SGLang events over ZMQ, HTTP lookups
  demo                      index a few events and print the scores
  fleet --out <file>        write a fleet workload (1,000 engines x 16,384 blocks) for replay and benchmarks
  gateway --http <[host:]port> --engines <file.json>  OpenAI proxy routing each request to the engine holding its prefix
  --version, -V             print the version
run 'kvindex <command> --help' for the options of a command
`;

/** The version in the package's package.json, two levels above src/cli, three above dist/src/cli. */
function packageVersion(): string {
  const up = import.meta.url.endsWith('.ts') ? '../../' : '../../../';
  const pkg = JSON.parse(readFileSync(new URL(`${up}package.json`, import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function run(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // No command is a usage error, as an unknown one is: a script or container that forgot its
  // arguments must fail, not exit 0 having done nothing.
  if (command === undefined) {
    process.stderr.write(`kvindex: no command given\n${USAGE}`);
    return 2;
  }
  if (command === '--help' || command === 'help' || command === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === '--version' || command === '-V') {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  const load = COMMANDS[command];
  if (load === undefined) {
    process.stderr.write(`kvindex: unknown command '${command}'\n${USAGE}`);
    return 2;
  }
  return (await load()).main(rest);
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const e = err as { code?: string; message?: string };
    process.stderr.write(`kvindex: ${e.code ? `[${e.code}] ` : ''}${e.message ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
