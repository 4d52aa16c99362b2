import type { ColumnType } from '@berth/db';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

/** The stored status; a pending flow past `expires_at` is expired even before the sweep marks it. */
export type StoredFlowStatus = 'pending' | 'completed' | 'expired';

export interface AuthFlowsTable {
  id: string;
  auth_id_hash: Buffer;
  approval_id_hash: Buffer;
  status: ColumnType<StoredFlowStatus, StoredFlowStatus | undefined, StoredFlowStatus>;
  client_name: ColumnType<string, string | undefined, string>;
  token: ColumnType<string | null, string | null | undefined, string | null>;
  tenant_id: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  expires_at: ColumnType<Date, Date | string, Date | string>;
  completed_at: NullableTimestamp;
  claimed_at: NullableTimestamp;
}

export interface AuthFlowTables {
  auth_flows: AuthFlowsTable;
}
