/**
 * An in-process fake of the control plane's DeploymentService (gRPC, through @berth/rpc) for the
 * gateway's tests: deployments and revisions in memory, tenant-scoped like the real one, every
 * request recorded, upload chunks kept, and routing (`ResolveDeployment`) set by the test.
 * Statuses are kept as REST spells them (the enum value names) and sent as the enums.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { ConflictError, InvalidArgumentError, NotFoundError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { DeploymentService, DeploymentStatus, Health, RevisionStatus, timestampFromDate, type Deployment, type Revision } from '@berth/proto';
import { HealthService, createRpcServer, type CallContext, type RpcServer, type ServiceImplementation } from '@berth/rpc';
import type { JsonObject } from '@bufbuild/protobuf';

/** Statuses as REST spells them: the names of the enum values. */
type DeploymentInit = Omit<Deployment, '$typeName' | '$unknown' | 'createdAt' | 'updatedAt' | 'status'> & { status: string; createdAt: Date; updatedAt: Date };
type RevisionInit = Omit<Revision, '$typeName' | '$unknown' | 'createdAt' | 'updatedAt' | 'status'> & { status: string; createdAt: Date };

/** The enum value a status name names (UNSPECIFIED for none). */
function wire<E extends Record<string, string | number>>(protoEnum: E, name: string): E[keyof E] {
  return (typeof protoEnum[name] === 'number' ? protoEnum[name] : 0) as E[keyof E];
}

export interface FakeLog {
  id: bigint;
  revisionId: string;
  type: 'build' | 'deploy';
  level: string;
  message: string;
}

export interface FakeUpload {
  id: string;
  deploymentId: string;
  tenantId: string;
  chunks: number[];
  bytes: number;
  sha: Buffer[];
  complete: boolean;
}

export interface Route {
  tenantId: string;
  upstreamUrl: string;
  customAuth: boolean;
  /** Sent upstream as x-berth-deployment-credential; none when unset. */
  upstreamCredential?: string;
  /** @default READY with an upstream, AWAITING_DEPLOY without */
  status?: string;
  statusMessage?: string;
}

export class FakeDeploymentService {
  readonly deployments = new Map<string, DeploymentInit>();
  readonly revisions = new Map<string, RevisionInit>();
  readonly secrets = new Map<string, Map<string, string>>();
  /** The webhook signing secret each deployment's last rotation made. */
  readonly webhookSecrets = new Map<string, string>();
  readonly logs: FakeLog[] = [];
  readonly uploads = new Map<string, FakeUpload>();
  /** Every call: method name and request (as received). */
  readonly calls: { method: string; request: Record<string, unknown> }[] = [];
  /** Routing per deployment id; unset ids resolve from the stored deployment (no upstream). */
  readonly routes = new Map<string, Route>();
  resolveCalls = 0;
  /** Milliseconds each ResolveDeployment takes (to test that concurrent misses share one call). */
  resolveDelayMs = 0;
  /** Milliseconds each UploadSource takes. */
  uploadDelayMs = 0;
  private server: RpcServer | undefined;
  private logSeq = 0n;
  private readonly logAdded = new EventEmitter().setMaxListeners(0);
  address = '';

  /**
   * @param internalToken the token calls must carry (none: every call is served).
   * @param handlers real handlers served instead of the fake's (e.g. the control plane's log methods over a real store).
   */
  async start(internalToken?: string, handlers: Partial<ServiceImplementation<typeof DeploymentService>> = {}): Promise<this> {
    this.server = createRpcServer({ logger: silentLogger(), shutdownTimeoutMs: 200, internalToken });
    this.server.add(DeploymentService, { ...this.implementation(), ...handlers });
    // It serves like a control plane: the gateway's /readyz checks this.
    this.server.add(Health, new HealthService({ '': 'SERVING' }).implementation);
    this.address = (await this.server.listen('127.0.0.1', 0)).address;
    return this;
  }

  async close(): Promise<void> {
    await this.server?.close();
  }

  callsOf(method: string): Record<string, unknown>[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.request);
  }

  addLog(revisionId: string, type: 'build' | 'deploy', message: string, level = 'info'): FakeLog {
    const entry = { id: ++this.logSeq, revisionId, type, level, message };
    this.logs.push(entry);
    this.logAdded.emit('added');
    return entry;
  }

  private deployment(tenantId: string, id: string): DeploymentInit {
    const found = this.deployments.get(id);
    if (!found || found.tenantId !== tenantId) throw new NotFoundError(`Deployment ID ${id} not found.`);
    return found;
  }

  private newRevision(deployment: DeploymentInit, config: JsonObject, status: string): RevisionInit {
    const revision: RevisionInit = {
      id: randomUUID(),
      deploymentId: deployment.id,
      status,
      source: deployment.source,
      sourceRevisionConfig: config,
      statusMessage: '',
      createdAt: new Date(Date.now() + this.revisions.size),
    };
    this.revisions.set(revision.id, revision);
    deployment.latestRevisionId = revision.id;
    deployment.sourceRevisionConfig = config;
    return revision;
  }

  private out(d: DeploymentInit) {
    return {
      ...d,
      status: wire(DeploymentStatus, d.status),
      secretNames: [...(this.secrets.get(d.id)?.keys() ?? [])].sort(),
      createdAt: timestampFromDate(d.createdAt),
      updatedAt: timestampFromDate(d.updatedAt),
    };
  }

  private revisionOut(r: RevisionInit) {
    return { ...r, status: wire(RevisionStatus, r.status), createdAt: timestampFromDate(r.createdAt), updatedAt: timestampFromDate(r.createdAt) };
  }

  /** The entries of a revision (the deployment's latest for '') after `offset`, of one type or both. */
  private logsAfter(req: { tenantId: string; deploymentId: string; revisionId: string; type: string; offset: bigint }) {
    const deployment = this.deployment(req.tenantId, req.deploymentId);
    const revisionId = req.revisionId || deployment.latestRevisionId;
    if (!this.revisions.has(revisionId)) throw new NotFoundError(`Revision ID ${revisionId} not found.`);
    const logs = this.logs.filter((l) => l.revisionId === revisionId && (!req.type || l.type === req.type) && l.id > req.offset);
    return { revisionId, logs: logs.map((l) => ({ id: l.id, timestamp: timestampFromDate(new Date()), level: l.level, message: l.message, type: l.type })) };
  }

  private implementation() {
    const record = (method: string, request: object) => this.calls.push({ method, request: { ...request } as Record<string, unknown> });
    const fake = this;
    return {
      createDeployment: async (req: {
        tenantId: string;
        name: string;
        source: string;
        sourceConfig?: JsonObject;
        sourceRevisionConfig?: JsonObject;
        secrets: { name: string; value: string }[];
      }) => {
        record('createDeployment', req);
        if (!req.tenantId) throw new InvalidArgumentError('tenant_id is required');
        for (const d of this.deployments.values()) {
          if (d.tenantId === req.tenantId && d.name === req.name) throw new ConflictError(`A deployment named ${req.name} already exists`);
        }
        const now = new Date();
        const deployment: DeploymentInit = {
          id: randomUUID(),
          tenantId: req.tenantId,
          name: req.name,
          source: req.source,
          sourceConfig: req.sourceConfig ?? {},
          sourceRevisionConfig: req.sourceRevisionConfig ?? {},
          status: 'AWAITING_DEPLOY',
          latestRevisionId: '',
          activeRevisionId: '',
          secretNames: [],
          sessionId: randomUUID(),
          healthMessage: '',
          statusMessage: '',
          createdAt: now,
          updatedAt: now,
        };
        this.deployments.set(deployment.id, deployment);
        this.secrets.set(deployment.id, new Map(req.secrets.map((s) => [s.name, s.value])));
        const waits = req.source === 'internal_source' && !req.sourceRevisionConfig?.source_tarball_path;
        this.newRevision(deployment, req.sourceRevisionConfig ?? {}, waits ? 'AWAITING_SOURCE' : 'QUEUED');
        return { deployment: this.out(deployment) };
      },
      listDeployments: async (req: { tenantId: string; nameContains: string; deploymentType: string; limit: number; offset: number }) => {
        record('listDeployments', req);
        const all = [...this.deployments.values()]
          .filter((d) => d.tenantId === req.tenantId && d.name.includes(req.nameContains))
          .filter((d) => !req.deploymentType || d.sourceConfig?.deployment_type === req.deploymentType)
          .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
        const page = all.slice(req.offset, req.offset + req.limit);
        return { resources: page.map((d) => this.out(d)), offset: req.offset + page.length };
      },
      getDeployment: async (req: { tenantId: string; deploymentId: string }) => {
        record('getDeployment', req);
        return { deployment: this.out(this.deployment(req.tenantId, req.deploymentId)) };
      },
      updateDeployment: async (req: {
        tenantId: string;
        deploymentId: string;
        sourceConfig?: JsonObject;
        sourceRevisionConfig?: JsonObject;
        replaceSecrets: boolean;
        secrets: { name: string; value: string }[];
      }) => {
        record('updateDeployment', req);
        const deployment = this.deployment(req.tenantId, req.deploymentId);
        if (req.sourceConfig?.deployment_type && req.sourceConfig.deployment_type !== deployment.sourceConfig?.deployment_type) {
          throw new ConflictError('deployment_type cannot change');
        }
        if (req.sourceConfig) deployment.sourceConfig = { ...deployment.sourceConfig, ...req.sourceConfig };
        if (req.replaceSecrets) this.secrets.set(deployment.id, new Map(req.secrets.map((s) => [s.name, s.value])));
        if (req.sourceRevisionConfig) this.newRevision(deployment, req.sourceRevisionConfig, 'QUEUED');
        deployment.updatedAt = new Date();
        return { deployment: this.out(deployment) };
      },
      deleteDeployment: async (req: { tenantId: string; deploymentId: string }) => {
        record('deleteDeployment', req);
        this.deployment(req.tenantId, req.deploymentId);
        this.deployments.delete(req.deploymentId);
        this.routes.delete(req.deploymentId);
        return {};
      },
      listRevisions: async (req: { tenantId: string; deploymentId: string; limit: number; offset: number; statuses: RevisionStatus[] }) => {
        record('listRevisions', req);
        this.deployment(req.tenantId, req.deploymentId);
        const all = [...this.revisions.values()]
          .filter((r) => r.deploymentId === req.deploymentId && (req.statuses.length === 0 || req.statuses.includes(wire(RevisionStatus, r.status))))
          .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
        const page = all.slice(req.offset, req.offset + req.limit);
        return { resources: page.map((r) => this.revisionOut(r)), offset: req.offset + page.length };
      },
      getRevision: async (req: { tenantId: string; deploymentId: string; revisionId: string }) => {
        record('getRevision', req);
        this.deployment(req.tenantId, req.deploymentId);
        const revision = this.revisions.get(req.revisionId);
        if (!revision || revision.deploymentId !== req.deploymentId) throw new NotFoundError(`Revision ID ${req.revisionId} not found.`);
        return { revision: this.revisionOut(revision) };
      },
      redeployRevision: async (req: { tenantId: string; deploymentId: string; revisionId: string }) => {
        record('redeployRevision', req);
        const deployment = this.deployment(req.tenantId, req.deploymentId);
        const revision = this.revisions.get(req.revisionId);
        if (!revision || revision.deploymentId !== req.deploymentId) throw new NotFoundError(`Revision ID ${req.revisionId} not found.`);
        if (revision.status.endsWith('_FAILED')) throw new ConflictError(`Revision ${revision.id} failed; it cannot be redeployed`);
        deployment.activeRevisionId = revision.id;
        return { deployment: this.out(deployment) };
      },
      getRevisionLogs: async (req: { tenantId: string; deploymentId: string; revisionId: string; type: string; offset: bigint; limit: number }) => {
        record('getRevisionLogs', req);
        const { revisionId, logs } = this.logsAfter(req);
        const page = logs.slice(0, req.limit);
        return { logs: page, nextOffset: page.at(-1)?.id ?? req.offset, revisionId };
      },
      // The log as it is, then each entry addLog adds, until the call ends (a fake log never ends;
      // the control plane's follow is tested over a real store).
      followRevisionLogs: async function* (
        this: void,
        req: { tenantId: string; deploymentId: string; revisionId: string; type: string; offset: bigint },
        context: CallContext,
      ) {
        record('followRevisionLogs', req);
        let offset = req.offset;
        while (!context.signal.aborted) {
          const added = once(fake.logAdded, 'added', { signal: context.signal }).catch(() => undefined);
          const { revisionId, logs } = fake.logsAfter({ ...req, offset });
          offset = logs.at(-1)?.id ?? offset;
          yield { revisionId, logs, ended: false };
          await added;
        }
      },
      uploadSource: async (req: { tenantId: string; deploymentId: string; uploadId: string; data: Uint8Array; last: boolean }) => {
        record('uploadSource', { ...req, data: req.data.length });
        const deployment = this.deployment(req.tenantId, req.deploymentId);
        if (this.uploadDelayMs) await new Promise((r) => setTimeout(r, this.uploadDelayMs));
        let upload = req.uploadId ? this.uploads.get(req.uploadId) : undefined;
        if (req.uploadId && !upload) throw new NotFoundError(`Upload ${req.uploadId} not found`);
        if (!upload) {
          upload = { id: randomUUID(), deploymentId: deployment.id, tenantId: req.tenantId, chunks: [], bytes: 0, sha: [], complete: false };
          this.uploads.set(upload.id, upload);
        }
        upload.chunks.push(req.data.length);
        upload.bytes += req.data.length;
        upload.sha.push(Buffer.from(req.data));
        if (!req.last) return { uploadId: upload.id };
        upload.complete = true;
        const latest = this.revisions.get(deployment.latestRevisionId);
        let revisionId = '';
        if (latest?.status === 'AWAITING_SOURCE') {
          latest.status = 'QUEUED';
          revisionId = latest.id;
        }
        return { uploadId: upload.id, objectPath: `uploads/${upload.id}.tgz`, revisionId };
      },
      resolveDeployment: async (req: { deploymentId: string }) => {
        record('resolveDeployment', req);
        this.resolveCalls += 1;
        if (this.resolveDelayMs) await new Promise((r) => setTimeout(r, this.resolveDelayMs));
        const route = this.routes.get(req.deploymentId);
        if (route) {
          const { status = route.upstreamUrl ? 'READY' : 'AWAITING_DEPLOY', ...rest } = route;
          return { ...rest, status: wire(DeploymentStatus, status) };
        }
        const deployment = this.deployments.get(req.deploymentId);
        if (!deployment) throw new NotFoundError(`Deployment ID ${req.deploymentId} not found.`);
        return {
          tenantId: deployment.tenantId,
          upstreamUrl: '',
          customAuth: false,
          status: wire(DeploymentStatus, deployment.status),
          statusMessage: deployment.statusMessage,
        };
      },
      // A change at once, then none (the control plane's watch is tested over a real store).
      watchDeployment: async function* (this: void, req: { tenantId: string; deploymentId: string }, context: CallContext) {
        record('watchDeployment', req);
        fake.deployment(req.tenantId, req.deploymentId);
        yield { deleted: false };
        await once(context.signal, 'abort').catch(() => undefined);
      },
      rotateWebhookSecret: async (req: { tenantId: string; deploymentId: string }) => {
        record('rotateWebhookSecret', req);
        this.deployment(req.tenantId, req.deploymentId);
        const secret = `whsec_${randomBytes(32).toString('base64')}`;
        this.webhookSecrets.set(req.deploymentId, secret);
        return { secret, createdAt: timestampFromDate(new Date()) };
      },
      setSecret: async (req: { tenantId: string; deploymentId: string; name: string; value: string }) => {
        record('setSecret', req);
        const deployment = this.deployment(req.tenantId, req.deploymentId);
        this.secrets.get(deployment.id)!.set(req.name, req.value);
        deployment.updatedAt = new Date();
        return { deployment: this.out(deployment) };
      },
      deleteSecret: async (req: { tenantId: string; deploymentId: string; name: string }) => {
        record('deleteSecret', req);
        const deployment = this.deployment(req.tenantId, req.deploymentId);
        if (!this.secrets.get(deployment.id)!.delete(req.name)) throw new NotFoundError(`Deployment ID ${deployment.id} has no secret ${req.name}.`);
        deployment.updatedAt = new Date();
        return { deployment: this.out(deployment) };
      },
      getDeploymentsHealth: async () => {
        record('getDeploymentsHealth', {});
        return { unhealthyDeployments: [...this.deployments.values()].filter((d) => d.status === 'UNHEALTHY').length };
      },
    };
  }
}
