/**
 * The published surface: the exports map, the named exports of each built entry point, and
 * `.d.ts` files free of internals (`stripInternal` in tsconfig.build.json). Runs against dist/
 * (`npm test` builds first); entries are resolved by package name from a dependent project.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, Record<string, string>> };

const EXPECTED: Record<string, string[]> = {
  kvindex: [
    'ApplyStatus', 'ErrorCode', 'EventParseError', 'KvIndexError', 'MatchResult', 'RadixTree', 'ShardedIndexer',
    'SnapshotDecodeError', 'U64_MAX', 'XXH3_SEED', 'computeBlockHashes', 'computeSequenceHashes',
    'createMatchResult', 'createSnapshotWriter', 'decodeSnapshot', 'encodeSnapshot', 'formatRouterEvent',
    'iterateSnapshot', 'mergeSnapshots', 'parseJsonLossless', 'parseRecorderLine', 'parseRouterEvent',
    'KvRouter', 'DYNAMO_MOCKER_PROFILE', 'ROUTING_PRESETS', 'ROUTING_PRESET_NAMES', 'isRoutingPresetName', 'selectWorker', 'ActiveSequences', 'ApproxIndex', 'formatActiveSequenceEvent',
    'parseActiveSequenceEvent', 'seededRandom', 'storedBlocks',
  ],
  'kvindex/nats': [
    'KvEventPublisher', 'KvEventSubscriber', 'KvQueryService', 'NatsError', 'NatsErrorCode',
    'connectNats', 'kvNames', 'redactUrl', 'requestFindMatches', 'KvRouteService', 'routeSubjects',
  ],
  'kvindex/trace': ['ClusterSim', 'FleetWorkload', 'FleetWorkloadWriter', 'deriveWorkerIds', 'parseTraceLine', 'readTraceFile', 'readWorkload', 'writeFleetWorkload'],
  'kvindex/zmq': [
    'EngineIndex', 'EventConverter', 'SkipReason', 'SourceState', 'StorageTier', 'ZmqError', 'ZmqErrorCode',
    'ZmqKvSource', 'checkEndpoint', 'decodeBatch', 'decodeEvent', 'loadMsgpack', 'loadZeromq', 'offsetEndpoint',
    'requestReplay', 'tierOf', 'toHash', 'RankState', 'StateReason', 'READMIT_AFTER_MS', 'DROP_LOG_INTERVAL_MS',
  ],
  'kvindex/http': ['EngineRegistry', 'HttpRequestError', 'registerIndexerRoutes', 'engineReadiness'],
  'kvindex/gateway': [
    'EngineCatalog', 'Endpoint', 'Gateway', 'GatewayError', 'Health', 'LocalTokenizer', 'Outcome', 'SharedLoads', 'SharedLoadsState', 'TENANT_HEADER', 'engineHeaders',
    'gatewayPlugin', 'readEngineUrl', 'readOpenAiRequest', 'registerSharedLoadsMetrics', 'relay', 'RemoteIndexClient', 'ReplicaFailure', 'FailOpen', 'RemoteIndexMetrics',
    'RemoteTransport', 'watchRegistrar', 'ReplicaRegistrar', 'RegisterFailure',
  ],
};

// RadixTree's storage layout, shared with other modules of the package through `@internal`.
const RADIX_STORAGE = ['nodes', 'edges', 'slotIds', 'tables', 'slotLo', 'slotHi', 'layout'];

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvindex-surface-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'kvindex'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function declarationFiles(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.d.ts'))
    .map((f) => join(folder, f));
}

describe('package surface', () => {
  it('exports exactly the root, ./nats, ./trace, ./zmq, ./http and ./gateway, each with types and import files in dist', () => {
    expect(Object.keys(pkg.exports)).toEqual(['.', './nats', './trace', './zmq', './http', './gateway']);
    for (const conditions of Object.values(pkg.exports)) {
      expect(Object.keys(conditions)).toEqual(['types', 'import']);
      expect(conditions.types).toMatch(/^\.\/dist\/.*\.d\.ts$/);
      expect(conditions.import).toMatch(/^\.\/dist\/.*\.js$/);
      expect(existsSync(join(ROOT, conditions.types!))).toBe(true);
      expect(existsSync(join(ROOT, conditions.import!))).toBe(true);
    }
  });

  it('each entry point, imported by package name, has exactly the curated named exports', () => {
    const script = `
      const names = {};
      for (const entry of ${JSON.stringify(Object.keys(EXPECTED))}) names[entry] = Object.keys(await import(entry)).sort();
      console.log(JSON.stringify(names));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' });
    const sorted = Object.fromEntries(Object.entries(EXPECTED).map(([k, v]) => [k, [...v].sort()]));
    expect(JSON.parse(out)).toEqual(sorted);
  });

  it('no .d.ts under dist/src mentions @internal', () => {
    const files = declarationFiles(join(ROOT, 'dist/src'));
    expect(files.length).toBeGreaterThan(10);
    expect(files.filter((f) => readFileSync(f, 'utf8').includes('@internal'))).toEqual([]);
  });

  it("RadixTree's storage fields are not members of its declaration", () => {
    const file = join(ROOT, 'dist/src/tree/radix-tree.d.ts');
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022);
    const tree = source.statements.find((s): s is ts.ClassDeclaration => ts.isClassDeclaration(s) && s.name?.text === 'RadixTree');
    expect(tree).toBeDefined();
    const members = tree!.members.map((m) => (m.name !== undefined && ts.isIdentifier(m.name) ? m.name.text : ''));
    expect(members).toContain('findMatches');
    expect(members.filter((m) => RADIX_STORAGE.includes(m))).toEqual([]);
  });

  it('a consumer importing the three entries type-checks against the .d.ts (no skipLibCheck)', () => {
    writeFileSync(join(dir, 'consumer.ts'), `
      import { RadixTree, ShardedIndexer, type RouterEvent, type ShardedIndexerOptions } from 'kvindex';
      import { KvEventSubscriber, kvNames, type KvEventSubscriberOptions } from 'kvindex/nats';
      import { ClusterSim, type TraceRequest } from 'kvindex/trace';
      const tree = new RadixTree();
      const event: RouterEvent = { workerId: 1n, event: { eventId: 0n, data: { type: 'cleared' } } };
      const status: string = tree.applyEvent(event);
      const options: ShardedIndexerOptions = { shards: 0, blockSize: 16 };
      const start: (o: KvEventSubscriberOptions) => Promise<KvEventSubscriber> = KvEventSubscriber.start;
      const request: TraceRequest | null = null;
      export const used = [status, options, start, request, ShardedIndexer, kvNames('ns', 'c').stream, ClusterSim];
      // @ts-expect-error the storage layout is not part of the published types
      tree.nodes;
    `);
    // exactOptionalPropertyTypes is left out: the nats client's own .d.ts do not pass it.
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true,
        skipLibCheck: false, types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')],
      },
      files: ['consumer.ts'],
    }));
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    // Throws with tsc's diagnostics on stdout when the check fails.
    execFileSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8' });
  });
});
