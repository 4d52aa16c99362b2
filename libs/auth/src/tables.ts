import type { ColumnType, Generated } from '@berth/db';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface TenantsTable {
  id: string;
  name: string;
  is_system: Generated<boolean>;
  created_at: Timestamp;
}

export interface ApiKeysTable {
  id: string;
  tenant_id: string;
  name: string;
  role: 'admin' | 'member';
  prefix: string;
  key_hash: Buffer;
  created_at: Timestamp;
  last_used_at: NullableTimestamp;
  expires_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

export interface AccessTokensTable {
  id: string;
  tenant_id: string;
  api_key_id: string;
  token_hash: Buffer;
  created_at: Timestamp;
  expires_at: Date;
  revoked_at: NullableTimestamp;
}

export interface ConsoleSessionsTable {
  id: string;
  seq: Generated<string>;
  tenant_id: string;
  api_key_id: string;
  token_hash: Buffer;
  created_at: Date;
  idle_expires_at: Date;
  expires_at: Date;
}

export interface AuthTables {
  tenants: TenantsTable;
  api_keys: ApiKeysTable;
  access_tokens: AccessTokensTable;
  console_sessions: ConsoleSessionsTable;
}
