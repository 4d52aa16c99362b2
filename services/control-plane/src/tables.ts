/**
 * Every table of the control plane's schema, for its one Kysely instance.
 */
import type { AuthFlowTables } from './auth-flows/tables.js';
import type { DeploymentTables } from './deployments/tables.js';

export type ControlPlaneTables = AuthFlowTables & DeploymentTables;
