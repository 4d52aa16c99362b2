import type { ColumnType, Generated } from '@berth/db';
import type { RevisionStatus } from './revision-lifecycle.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json = ColumnType<Record<string, unknown>, string, string>;

export type DeploymentSource = 'internal_source' | 'external_docker';

export interface DeploymentsTable {
  id: string;
  tenant_id: string;
  name: string;
  source: DeploymentSource;
  source_config: Json;
  deployment_type: 'dev' | 'prod';
  session_id: string;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  deleting: ColumnType<boolean, boolean | undefined, boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface RevisionsTable {
  id: string;
  deployment_id: string;
  /**
   * Set on insert; changed only by DeploymentStore.move, which checks the move against
   * revision-lifecycle.ts (an update type of `never` keeps every other update from writing it).
   */
  status: ColumnType<RevisionStatus, RevisionStatus, never>;
  source: DeploymentSource;
  /** As stored (jsonb); store.ts parses it into a RevisionConfig (revision-config.ts) when it reads a row. */
  source_revision_config: ColumnType<unknown, string, string>;
  /** The upload an internal_source revision is built from (migration 0007); null until it has one. */
  source_upload_id: ColumnType<string | null, string | null | undefined, string | null>;
  status_message: ColumnType<string, string | undefined, string>;
  /** The build's folder, relative to the artifacts folder (ProjectBuilder.folderOf; absolute in rows of older builds). */
  artifact_path: string | null;
  /** The build's archive in object storage and its hex SHA-256 (migration 0006); null without a bucket. */
  archive_key: ColumnType<string | null, string | null | undefined, string | null>;
  archive_sha256: ColumnType<string | null, string | null | undefined, string | null>;
  upstream_url: string | null;
  /** The deployment's database login its agent servers use (migration 0009); null before its first start. */
  database_login: ColumnType<string | null, string | null | undefined, string | null>;
  custom_auth: ColumnType<boolean, boolean | undefined, boolean>;
  /** Why its agent server does not answer now; null while healthy (migration 0003). */
  health_message: ColumnType<string | null, string | null | undefined, string | null>;
  /** When its log ended: nothing more is written to it (migration 0008); null while it may grow. */
  logs_ended_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface RevisionLogsTable {
  id: Generated<string>;
  revision_id: string;
  type: 'build' | 'deploy';
  level: 'info' | 'warn' | 'error';
  message: string;
  created_at: Timestamp;
}

export interface DeploymentSecretsTable {
  deployment_id: string;
  name: string;
  value_encrypted: Buffer;
}

export interface DeploymentWebhookSecretsTable {
  deployment_id: string;
  value_encrypted: Buffer;
  created_at: Generated<Date>;
}

export interface SourceUploadsTable {
  id: string;
  deployment_id: string;
  complete: ColumnType<boolean, boolean | undefined, boolean>;
  size: ColumnType<string, number | undefined, number | string>;
  created_at: Timestamp;
}

export interface SourceUploadChunksTable {
  upload_id: string;
  seq: number;
  data: Buffer;
}

export interface DeploymentTables {
  deployments: DeploymentsTable;
  revisions: RevisionsTable;
  revision_logs: RevisionLogsTable;
  deployment_secrets: DeploymentSecretsTable;
  deployment_webhook_secrets: DeploymentWebhookSecretsTable;
  source_uploads: SourceUploadsTable;
  source_upload_chunks: SourceUploadChunksTable;
}
