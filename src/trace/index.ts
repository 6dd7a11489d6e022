/**
 * kvindex/trace: Mooncake trace and replay workload readers, and the cluster simulation that
 * turns trace requests into a fleet's KV events. Curated like src/index.ts: everything not
 * listed here is internal.
 */

// Values
export { ClusterSim, deriveWorkerIds } from './cluster-sim.js';
export { FleetWorkload } from './fleet-workload.js';
export { FleetWorkloadWriter, writeFleetWorkload } from './fleet-writer.js';
export { readTraceFile, parseTraceLine } from './mooncake.js';
export { readWorkload } from './workload.js';

// Types
export type { ClusterSimOptions } from './cluster-sim.js';
export type { FleetLookup, FleetSink, FleetWorkloadOptions, FleetWorkloadStats } from './fleet-workload.js';
export type { WriteFleetOptions } from './fleet-writer.js';
export type { TraceRequest } from './mooncake.js';
export type { WorkloadOp } from './workload.js';
