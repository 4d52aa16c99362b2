/**
 * The gRPC face of {@link Deployments}: `berth.controlplane.v1.DeploymentService`.
 */
import { InvalidArgumentError } from '@berth/errors';
import { DeploymentService, timestampDate, timestampFromDate, type JsonObject, type Timestamp } from '@berth/proto';
import type { ServiceImplementation } from '@berth/rpc';
import { deploymentStatusWire } from './deployment-status.js';
import { revisionStatusWire, type RevisionStatus } from './revision-lifecycle.js';
import type { DeploymentView, Deployments } from './service.js';
import type { DeploymentWatch } from './deployment-watch.js';
import type { RevisionLogs } from './revision-logs.js';
import type { LogEntryRow } from './log-store.js';
import type { RevisionRow } from './store.js';

function deploymentMessage(d: DeploymentView) {
  return {
    id: d.id,
    tenantId: d.tenant_id,
    name: d.name,
    source: d.source,
    sourceConfig: d.source_config as JsonObject,
    sourceRevisionConfig: d.source_revision_config as JsonObject,
    status: deploymentStatusWire.encode(d.status),
    statusMessage: d.status_message ?? '',
    latestRevisionId: d.latest_revision_id ?? '',
    activeRevisionId: d.active_revision_id ?? '',
    secretNames: d.secret_names,
    sessionId: d.session_id,
    createdAt: timestampFromDate(d.created_at),
    updatedAt: timestampFromDate(d.updated_at),
    healthMessage: d.health_message ?? '',
  };
}

function revisionMessage(r: RevisionRow) {
  return {
    id: r.id,
    deploymentId: r.deployment_id,
    status: revisionStatusWire.encode(r.status),
    source: r.source,
    sourceRevisionConfig: r.source_revision_config as JsonObject,
    statusMessage: r.status_message,
    createdAt: timestampFromDate(r.created_at),
    updatedAt: timestampFromDate(r.updated_at),
  };
}

function logMessage(l: LogEntryRow) {
  return { id: BigInt(l.id), timestamp: timestampFromDate(l.created_at), level: l.level, message: l.message, type: l.type };
}

function logType(type: string): { type?: 'build' | 'deploy' } {
  if (!type) return {};
  if (type !== 'build' && type !== 'deploy') throw new InvalidArgumentError('type must be build or deploy');
  return { type };
}

const timeOf = (t: Timestamp | undefined) => (t ? timestampDate(t) : undefined);

/** What the log and watch methods read and wait on. */
export interface DeploymentStreams {
  logs: RevisionLogs;
  watch: DeploymentWatch;
}

/** The log and watch methods of the service (the gateway's tests serve them on their own, over a real store). */
export function streamHandlers({
  logs,
  watch,
}: DeploymentStreams): Pick<ServiceImplementation<typeof DeploymentService>, 'getRevisionLogs' | 'followRevisionLogs' | 'watchDeployment'> {
  return {
    getRevisionLogs: async (r) => {
      const since = timeOf(r.since);
      const until = timeOf(r.until);
      const answer = await logs.read(r.tenantId, r.deploymentId, {
        ...(r.revisionId ? { revisionId: r.revisionId } : {}),
        ...logType(r.type),
        offset: Number(r.offset),
        limit: page(r.limit, 0, 1000).limit,
        ...(since ? { since } : {}),
        ...(until ? { until } : {}),
      });
      return { logs: answer.logs.map(logMessage), nextOffset: BigInt(answer.nextOffset), revisionId: answer.revisionId };
    },
    async *followRevisionLogs(r, context) {
      const since = timeOf(r.since);
      const selector = { ...(r.revisionId ? { revisionId: r.revisionId } : {}), ...logType(r.type), offset: Number(r.offset), ...(since ? { since } : {}) };
      for await (const part of logs.follow(r.tenantId, r.deploymentId, selector, context.signal)) {
        yield { revisionId: part.revisionId, logs: part.logs.map(logMessage), ended: part.ended };
      }
    },
    async *watchDeployment(r, context) {
      yield* watch.watch(r.tenantId, r.deploymentId, context.signal);
    },
  };
}

/** The statuses a ListRevisions filter names; a number that names none is refused. */
function statusFilter(values: number[]): RevisionStatus[] {
  return values.map((value) => {
    const status = revisionStatusWire.decode(value);
    if (!status) throw new InvalidArgumentError(`${value} is not a revision status`);
    return status;
  });
}

function page(limit: number, offset: number, max = 100): { limit: number; offset: number } {
  if (limit < 0 || limit > max || offset < 0) throw new InvalidArgumentError(`limit must be 0-${max} and offset at least 0`);
  return { limit: limit || 20, offset };
}

export function deploymentHandlers(deployments: Deployments, streams: DeploymentStreams): ServiceImplementation<typeof DeploymentService> {
  return {
    createDeployment: async (r) => ({
      deployment: deploymentMessage(
        await deployments.create({
          tenantId: r.tenantId,
          name: r.name,
          source: r.source,
          ...(r.sourceConfig ? { sourceConfig: r.sourceConfig } : {}),
          ...(r.sourceRevisionConfig ? { sourceRevisionConfig: r.sourceRevisionConfig } : {}),
          secrets: r.secrets.map((s) => ({ name: s.name, value: s.value })),
          ...(r.sessionId ? { sessionId: r.sessionId } : {}),
        }),
      ),
    }),
    listDeployments: async (r) => {
      const { resources, offset } = await deployments.list(r.tenantId, {
        ...page(r.limit, r.offset),
        ...(r.nameContains ? { nameContains: r.nameContains } : {}),
        ...(r.deploymentType ? { deploymentType: r.deploymentType } : {}),
      });
      return { resources: resources.map(deploymentMessage), offset };
    },
    getDeployment: async (r) => ({ deployment: deploymentMessage(await deployments.get(r.tenantId, r.deploymentId)) }),
    updateDeployment: async (r) => ({
      deployment: deploymentMessage(
        await deployments.update({
          tenantId: r.tenantId,
          deploymentId: r.deploymentId,
          ...(r.sourceConfig ? { sourceConfig: r.sourceConfig } : {}),
          ...(r.sourceRevisionConfig ? { sourceRevisionConfig: r.sourceRevisionConfig } : {}),
          ...(r.replaceSecrets ? { secrets: r.secrets.map((s) => ({ name: s.name, value: s.value })) } : {}),
        }),
      ),
    }),
    deleteDeployment: async (r) => {
      await deployments.delete(r.tenantId, r.deploymentId);
      return {};
    },
    listRevisions: async (r) => {
      const { resources, offset } = await deployments.revisions(r.tenantId, r.deploymentId, {
        ...page(r.limit, r.offset),
        ...(r.statuses.length ? { statuses: statusFilter(r.statuses) } : {}),
      });
      return { resources: resources.map(revisionMessage), offset };
    },
    getRevision: async (r) => ({ revision: revisionMessage(await deployments.revision(r.tenantId, r.deploymentId, r.revisionId)) }),
    redeployRevision: async (r) => ({ deployment: deploymentMessage(await deployments.redeploy(r.tenantId, r.deploymentId, r.revisionId)) }),
    ...streamHandlers(streams),
    uploadSource: async (r) => {
      const result = await deployments.upload({
        tenantId: r.tenantId,
        deploymentId: r.deploymentId,
        ...(r.uploadId ? { uploadId: r.uploadId } : {}),
        data: Buffer.from(r.data),
        last: r.last,
      });
      return { uploadId: result.uploadId, objectPath: result.objectPath ?? '', revisionId: result.revisionId ?? '' };
    },
    resolveDeployment: async (r) => {
      const target = await deployments.resolve(r.deploymentId);
      return {
        tenantId: target.tenant_id,
        upstreamUrl: target.upstream_url ?? '',
        customAuth: target.custom_auth,
        upstreamCredential: target.credential,
        status: deploymentStatusWire.encode(target.status),
        statusMessage: target.status_message ?? '',
        tracingCredential: target.tracingCredential,
        name: target.name,
        sessionId: target.session_id,
      };
    },
    getDeploymentsHealth: async () => ({ unhealthyDeployments: await deployments.unhealthyCount() }),
    setSecret: async (r) => ({ deployment: deploymentMessage(await deployments.setSecret(r.tenantId, r.deploymentId, r.name, r.value)) }),
    deleteSecret: async (r) => ({ deployment: deploymentMessage(await deployments.deleteSecret(r.tenantId, r.deploymentId, r.name)) }),
    rotateWebhookSecret: async (r) => {
      const { secret, createdAt } = await deployments.rotateWebhookSecret(r.tenantId, r.deploymentId);
      return { secret, createdAt: timestampFromDate(createdAt) };
    },
  };
}
