/** Answers of the public API the console reads (the shapes of docs/reference/rest.md). */

export type DeploymentStatus = 'AWAITING_DEPLOY' | 'READY' | 'UNHEALTHY' | 'FAILED' | 'LATEST_FAILED' | 'UNKNOWN';

export interface Deployment {
  id: string;
  name: string;
  status: DeploymentStatus;
  status_message: string | null;
  health_message: string | null;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  deployment_url: string;
  created_at: string;
  updated_at: string;
}

export interface DeploymentList {
  resources: Deployment[];
  offset: number;
}

export interface Readiness {
  status: 'ok' | 'degraded' | 'failing';
  checks: Record<string, { status: 'ok' | 'failing'; detail?: string }>;
  unhealthy_deployments?: number;
}

export interface Info {
  /** The LangSmith version whose API the gateway matches (what the langsmith SDK checks). */
  version: string;
  berth_version: string;
}
