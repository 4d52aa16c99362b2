export { Lease, LeaseLostError, leaseSettings } from './lease.js';
export type { LeaseHolderOptions, LeaseOptions, LeaseSettings, Renewal } from './lease.js';
export { OwnerLiveness } from './liveness.js';
export type { OwnerLivenessOptions } from './liveness.js';
export { leaseExpiry, NO_TAKEOVER, ownerAlive, takeoverCondition } from './sql.js';
export type { Takeover } from './sql.js';
export { leaseContract } from './contract.js';
export type { ContractCase, Holder, LeaseContractHarness, LeaseRows } from './contract.js';
