/**
 * NATS names shared with Dynamo's KV router (Dynamo reference §5.1): the JetStream stream the
 * engines publish RouterEvents to, the object-store bucket and key of the radix snapshot, and
 * kvindex's own request/reply subject for remote lookups. Dynamo derives them from the
 * component subject `namespace.<ns>.component.<comp>` with `Slug::slugify`, then replaces `_`
 * by `-`; doing the same here is what lets kvindex share a stream with Dynamo routers.
 */

import { ErrorCode, KvIndexError } from '../errors.js';

/** Object-store key of the snapshot (Dynamo's `RADIX_STATE_FILE`). */
export const SNAPSHOT_KEY = 'radix-state';

/** Dynamo's `Slug::slugify`: lowercase, chars outside `[a-z0-9_-]` -> `_`, leading `_` removed. */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '_')
    .replace(/^_+/, '');
}

/** All the names of one (namespace, component) pair. */
export interface KvNames {
  /** `namespace-<ns>-component-<comp>-kv-events`. */
  stream: string;
  /** `<stream>.*`, the stream's only subject filter. */
  streamSubjects: string[];
  /** `<stream>.queue`, where publishers send (Dynamo's event name "queue"). */
  publishSubject: string;
  /** `namespace-<ns>-component-<comp>-radix-bucket`. */
  bucket: string;
  /** `radix-state`. */
  snapshotKey: string;
  /** `<bucket>-lease`: the KV bucket of the snapshot lease (snapshot-lease.ts; not Dynamo). */
  leaseBucket: string;
  /** `namespace-<ns>-component-<comp>.kvindex.find`: kvindex's findMatches service (not Dynamo). */
  querySubject: string;
  /** `namespace-<ns>-component-<comp>.kvindex.remove_worker`: the admin request removing a worker (not Dynamo). */
  adminRemoveWorkerSubject: string;
}

/**
 * Derives every name from a namespace and a component (non-empty strings; Dynamo's defaults
 * are `dynamo` and `backend`). Throws `KvIndexError` `InvalidOption` naming the bad field.
 */
export function kvNames(namespace: string, component: string): KvNames {
  for (const [field, value] of [['namespace', namespace], ['component', component]] as const) {
    if (typeof value !== 'string' || value === '' || slugify(value) === '') {
      throw new KvIndexError(ErrorCode.InvalidOption, `${field}: expected a non-empty name, got ${JSON.stringify(value)}`);
    }
  }
  const subject = `namespace.${namespace}.component.${component}`;
  const dashed = (s: string): string => slugify(s).replace(/_/g, '-');
  const stream = dashed(`${subject}.kv_events`);
  const bucket = dashed(`${subject}-radix-bucket`);
  return {
    stream,
    streamSubjects: [`${stream}.*`],
    publishSubject: `${stream}.queue`,
    bucket,
    snapshotKey: SNAPSHOT_KEY,
    leaseBucket: `${bucket}-lease`,
    querySubject: `${dashed(subject)}.kvindex.find`,
    adminRemoveWorkerSubject: `${dashed(subject)}.kvindex.remove_worker`,
  };
}
