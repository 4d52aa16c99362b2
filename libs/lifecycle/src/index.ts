/**
 * `@berth/lifecycle` — one vocabulary for every entity with a status (revisions; exports, export
 * runs, sandboxes, snapshots, warm-pool members next): its states and allowed moves in one table
 * ({@link defineLifecycle}), the error for a move the table does not allow
 * ({@link IllegalTransitionError}), and the states as a protobuf enum between services
 * ({@link wireEnum}). The store of each entity performs every status change through one function
 * that checks the move against the table.
 */
export { IllegalTransitionError, Lifecycle, defineLifecycle } from './lifecycle.js';
export type { LifecycleTable, StateSpec } from './lifecycle.js';
export { wireEnum } from './wire.js';
export type { ProtoEnum, WireEnum } from './wire.js';
