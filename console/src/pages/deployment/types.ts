/** The deployment page's answers of the public API (docs/reference/rest.md, `/v2/deployments/{deployment_id}…`). */
import type { Deployment } from '../../types';

export interface ResourceSpec {
  cpu?: number;
  memory_mb?: number;
  min_scale?: number;
  max_scale?: number;
}

/** `GET /v2/deployments/{deployment_id}`: the list's fields and the ones only this page shows. */
export interface DeploymentDetail extends Deployment {
  source: string;
  source_config: { deployment_type?: string; resource_spec?: ResourceSpec | null };
  secrets: { name: string }[];
  session_id: string | null;
}

export type RevisionStatus =
  | 'AWAITING_SOURCE'
  | 'QUEUED'
  | 'AWAITING_BUILD'
  | 'BUILDING'
  | 'AWAITING_DEPLOY'
  | 'DEPLOYING'
  | 'DEPLOYED'
  | 'BUILD_FAILED'
  | 'DEPLOY_FAILED'
  | 'INTERRUPTED'
  | 'UNKNOWN';

export interface Revision {
  id: string;
  deployment_id: string;
  status: RevisionStatus;
  source: string;
  status_message: string;
  created_at: string;
  updated_at: string;
}

export interface RevisionList {
  resources: Revision[];
  offset: number;
}

export type LogType = 'build' | 'deploy';

export interface LogEntry {
  id: number;
  timestamp: string;
  level: string;
  message: string;
  type: string;
}

export interface LogPage {
  logs: LogEntry[];
  next_offset: number;
  revision_id: string | null;
}

export interface WebhookSecret {
  secret: string;
  created_at: string;
}

/** Query keys of the page, so that a `changed` event of the deployment refreshes them all. */
export const keys = {
  deployment: (id: string) => ['deployment', id] as const,
  revisions: (id: string) => ['deployment', id, 'revisions'] as const,
  firstLog: (id: string, revisionId: string, type: LogType) => ['deployment', id, 'first-log', revisionId, type] as const,
};

export const deploymentPath = (id: string) => `/v2/deployments/${encodeURIComponent(id)}`;
