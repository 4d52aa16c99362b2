/**
 * Deployments as the API sees them: create (with its first revision), list, read, update (a new
 * source revision config makes a new revision), delete, revisions, redeploy, source uploads,
 * and where a deployment's traffic goes. Building and deploying revisions happens in the revision
 * pipeline's jobs (pipeline.ts); their logs are revision-logs.ts'.
 */
import { randomUUID } from 'node:crypto';
import { generateWebhookSecret } from '@berth/agent-contract';
import { ConflictError, NotFoundError, RequestValidationError } from '@berth/errors';
import { DEPLOYMENT_NAME_RULE, SECRET_NAME_RULE, isDeploymentName, isSecretName, isUuid, parseUploadRef, tracingCredential, uploadRef } from '@berth/ids';
import { IllegalTransitionError } from '@berth/lifecycle';
import { deploymentStatus, type DeploymentStatus } from './deployment-status.js';
import type { RevisionPipeline } from './pipeline.js';
import { RevisionConfig } from './revision-config.js';
import type { RevisionStatus } from './revision-lifecycle.js';
import type { SecretBox } from '@berth/secret-box';
import type { SealedSecret } from './secret-store.js';
import type { DeploymentRow, DeploymentStore, NewRevision, ResolvedDeployment, RevisionRow } from './store.js';
import type { DeploymentSource } from './tables.js';

export interface DeploymentView extends DeploymentRow {
  secret_names: string[];
  /** source_revision_config of the latest revision. */
  source_revision_config: RevisionConfig;
  /** Why the serving revision's agent server does not answer now; null while it does. */
  health_message: string | null;
  /** Derived from its serving and latest revisions (deployment-status.ts). */
  status: DeploymentStatus;
  /** Why it has that status; null while READY or AWAITING_DEPLOY. */
  status_message: string | null;
}

export interface CreateDeploymentInput {
  tenantId: string;
  name: string;
  source: string;
  sourceConfig?: Record<string, unknown>;
  sourceRevisionConfig?: Record<string, unknown>;
  secrets: { name: string; value: string }[];
  /** The deployment's tracing project. @default a new id */
  sessionId?: string;
}

export interface UpdateDeploymentInput {
  tenantId: string;
  deploymentId: string;
  sourceConfig?: Record<string, unknown>;
  sourceRevisionConfig?: Record<string, unknown>;
  /** Replaces every secret when present. */
  secrets?: { name: string; value: string }[];
}

export interface DeploymentsOptions {
  /**
   * Largest accepted project tarball.
   * @default 209_715_200 (200 MiB)
   */
  maxUploadBytes?: number;
  /**
   * Most a deployment's `resource_spec` may ask per replica (the operator's maxima): above is a 422.
   * @default no bound but the API schema's
   */
  maxResources?: { cpu?: number; memoryMb?: number };
  /**
   * Most deployments one tenant may have (a deleted one no longer counts): a deployment holds a
   * database, agent servers and builds on the platform's machines.
   * @default 50
   */
  maxDeploymentsPerTenant?: number;
  /**
   * Most secrets one deployment may have: each is an environment variable of its agent servers,
   * sealed in the control plane's database. A list longer than this is a 422; setting one more by
   * name a 429.
   * @default 200
   */
  maxSecretsPerDeployment?: number;
}

function problem(loc: (string | number)[], msg: string): RequestValidationError {
  return new RequestValidationError([{ loc, msg, type: 'value_error' }]);
}

/** A source_revision_config as a caller gave it, checked. */
function revisionConfigInput(value: Record<string, unknown>): RevisionConfig {
  const parsed = RevisionConfig.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new RequestValidationError(
    parsed.error.issues.map((issue) => ({ loc: ['body', 'source_revision_config', ...issue.path.map(String)], msg: issue.message, type: 'value_error' })),
  );
}

export class Deployments {
  private readonly maxUploadBytes: number;
  private readonly maxResources: { cpu?: number; memoryMb?: number };
  private readonly maxDeploymentsPerTenant: number;
  private readonly maxSecretsPerDeployment: number;

  constructor(
    private readonly store: DeploymentStore,
    private readonly secretBox: SecretBox,
    private readonly pipeline: RevisionPipeline,
    options: DeploymentsOptions = {},
  ) {
    this.maxUploadBytes = options.maxUploadBytes ?? 200 * 1024 * 1024;
    this.maxDeploymentsPerTenant = options.maxDeploymentsPerTenant ?? 50;
    this.maxSecretsPerDeployment = options.maxSecretsPerDeployment ?? 200;
    this.maxResources = options.maxResources ?? {};
  }

  /** 422 when `resource_spec` asks more than the operator allows. */
  private checkResources(sourceConfig: Record<string, unknown>): void {
    const spec = (sourceConfig.resource_spec ?? {}) as { cpu?: unknown; memory_mb?: unknown };
    const { cpu, memoryMb } = this.maxResources;
    if (cpu !== undefined && typeof spec.cpu === 'number' && spec.cpu > cpu) {
      throw problem(['body', 'source_config', 'resource_spec', 'cpu'], `at most ${cpu} CPU per replica on this platform`);
    }
    if (memoryMb !== undefined && typeof spec.memory_mb === 'number' && spec.memory_mb > memoryMb) {
      throw problem(['body', 'source_config', 'resource_spec', 'memory_mb'], `at most ${memoryMb} MB per replica on this platform`);
    }
  }

  async create(input: CreateDeploymentInput): Promise<DeploymentView> {
    if (!isDeploymentName(input.name)) throw problem(['body', 'name'], `a deployment name is ${DEPLOYMENT_NAME_RULE}`);
    if (input.source !== 'internal_source' && input.source !== 'external_docker') {
      throw problem(['body', 'source'], 'source must be internal_source or external_docker');
    }
    const source = input.source as DeploymentSource;
    const sourceConfig = { deployment_type: 'dev', ...(input.sourceConfig ?? {}) };
    const deploymentType = sourceConfig.deployment_type;
    if (deploymentType !== 'dev' && deploymentType !== 'prod')
      throw problem(['body', 'source_config', 'deployment_type'], 'deployment_type must be dev or prod');
    if (input.sessionId !== undefined && !isUuid(input.sessionId)) throw problem(['body', 'session_id'], 'session_id must be a UUID');
    this.checkResources(sourceConfig);
    const id = randomUUID();
    const revision = await this.newRevision(id, source, revisionConfigInput(input.sourceRevisionConfig ?? {}), true);
    const row = await this.store.create(
      {
        id,
        tenant_id: input.tenantId,
        name: input.name,
        source,
        source_config: sourceConfig,
        deployment_type: deploymentType,
        session_id: input.sessionId ?? randomUUID(),
      },
      revision,
      this.seal(input.secrets),
      // Shown to nobody yet: rotateWebhookSecret hands out the one that signs (once).
      this.secretBox.seal(generateWebhookSecret()),
      this.maxDeploymentsPerTenant,
    );
    if (revision.status === 'QUEUED') await this.pipeline.build(revision.id);
    return this.view(row);
  }

  async list(
    tenantId: string,
    query: { nameContains?: string; deploymentType?: string; limit: number; offset: number },
  ): Promise<{ resources: DeploymentView[]; offset: number }> {
    const rows = await this.store.list(tenantId, query);
    return { resources: await this.views(rows), offset: query.offset + rows.length };
  }

  async get(tenantId: string, id: string): Promise<DeploymentView> {
    return this.view(await this.store.get(tenantId, id));
  }

  async update(input: UpdateDeploymentInput): Promise<DeploymentView> {
    const current = await this.store.get(input.tenantId, input.deploymentId);
    let sourceConfig: Record<string, unknown> | undefined;
    if (input.sourceConfig) {
      sourceConfig = { ...current.source_config, ...input.sourceConfig };
      if (sourceConfig.deployment_type !== current.deployment_type) {
        throw problem(['body', 'source_config', 'deployment_type'], 'deployment_type cannot change: create a new deployment');
      }
      this.checkResources(input.sourceConfig);
    }
    // Keys the new config leaves out keep the latest revision's values (a PATCH with only a new
    // tarball keeps a custom langgraph_config_path).
    const latest = input.sourceRevisionConfig && current.latest_revision_id ? await this.store.revisionById(current.latest_revision_id) : undefined;
    const revision = input.sourceRevisionConfig
      ? await this.newRevision(
          current.id,
          current.source,
          { ...(latest?.source_revision_config ?? {}), ...revisionConfigInput(input.sourceRevisionConfig) },
          false,
        )
      : undefined;
    const { deployment, interrupted } = await this.store.update(input.tenantId, input.deploymentId, {
      ...(sourceConfig ? { sourceConfig } : {}),
      ...(revision ? { revision } : {}),
      ...(input.secrets ? { secrets: this.seal(input.secrets) } : {}),
    });
    for (const revisionId of interrupted) this.pipeline.interrupt(revisionId);
    if (revision?.status === 'QUEUED') await this.pipeline.build(revision.id);
    return this.view(deployment);
  }

  /**
   * Adds one secret or replaces its value. Like a PATCH of `secrets`, this makes no revision: the
   * agent servers running now keep the environment they started with, and the next revision
   * deployed (a new source, a redeploy) gets the new value.
   */
  async setSecret(tenantId: string, deploymentId: string, name: string, value: string): Promise<DeploymentView> {
    if (!isSecretName(name)) throw problem(['path', 'name'], SECRET_NAME_RULE);
    const secret = { name, sealed: this.secretBox.seal(value) };
    return this.view(await this.store.setSecret(tenantId, deploymentId, secret, this.maxSecretsPerDeployment));
  }

  /** Removes one secret (no revision, as setSecret); NotFoundError when there is none of that name. */
  async deleteSecret(tenantId: string, deploymentId: string, name: string): Promise<DeploymentView> {
    return this.view(await this.store.removeSecret(tenantId, deploymentId, name));
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.store.markDeleting(tenantId, id))) throw new NotFoundError(`Deployment ID ${id} not found.`);
    await this.pipeline.remove(id);
  }

  async revisions(
    tenantId: string,
    deploymentId: string,
    query: { limit: number; offset: number; statuses?: RevisionStatus[] },
  ): Promise<{ resources: RevisionRow[]; offset: number }> {
    await this.store.get(tenantId, deploymentId);
    const rows = await this.store.revisions(deploymentId, query);
    return { resources: rows, offset: query.offset + rows.length };
  }

  async revision(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRow> {
    await this.store.get(tenantId, deploymentId);
    return this.store.revision(deploymentId, revisionId);
  }

  /** Deploys what a revision deployed again, as a new revision. */
  async redeploy(tenantId: string, deploymentId: string, revisionId: string): Promise<DeploymentView> {
    const revision = await this.revision(tenantId, deploymentId, revisionId);
    if (revision.status === 'AWAITING_SOURCE') throw new ConflictError(`Revision ${revisionId} has no source to deploy yet`);
    return this.update({ tenantId, deploymentId, sourceRevisionConfig: revision.source_revision_config });
  }

  /**
   * Gives the deployment a new webhook signing secret and answers it: the only time it is shown.
   * Its agent servers read it when they start, so a deployed revision is deployed again (a new
   * revision of the same source); one not deployed yet gets it when it is.
   */
  async rotateWebhookSecret(tenantId: string, deploymentId: string): Promise<{ secret: string; createdAt: Date; deployment: DeploymentView }> {
    const deployment = await this.store.get(tenantId, deploymentId);
    const secret = generateWebhookSecret();
    // A replacing write always answers its row's time.
    const createdAt = (await this.store.setWebhookSecret(deployment.id, this.secretBox.seal(secret), true))!;
    const active = deployment.active_revision_id;
    return { secret, createdAt, deployment: active ? await this.redeploy(tenantId, deploymentId, active) : await this.get(tenantId, deploymentId) };
  }

  /**
   * Takes one chunk of a project tarball. The last chunk completes the upload and, when the
   * deployment's latest revision waits for its source, attaches it and starts the build.
   */
  async upload(input: {
    tenantId: string;
    deploymentId: string;
    uploadId?: string;
    data: Buffer;
    last: boolean;
  }): Promise<{ uploadId: string; objectPath?: string; revisionId?: string }> {
    const deployment = await this.store.get(input.tenantId, input.deploymentId);
    if (deployment.source !== 'internal_source') throw new ConflictError(`Deployment ${deployment.id} deploys an image (external_docker); it takes no uploads`);
    let uploadId = input.uploadId;
    if (!uploadId) {
      uploadId = randomUUID();
      await this.store.beginUpload(uploadId, deployment.id);
    }
    if (input.data.length) await this.store.appendChunk(uploadId, deployment.id, input.data, this.maxUploadBytes);
    if (!input.last) return { uploadId };
    await this.store.completeUpload(uploadId, deployment.id);
    const objectPath = uploadRef({ deploymentId: deployment.id, uploadId });
    const latest = deployment.latest_revision_id ? await this.store.revisionById(deployment.latest_revision_id) : undefined;
    if (latest?.status !== 'AWAITING_SOURCE') return { uploadId, objectPath };
    try {
      await this.store.move({ revisionId: latest.id }, 'QUEUED', {
        source_revision_config: { ...latest.source_revision_config, source_tarball_path: objectPath },
        source_upload_id: uploadId,
      });
    } catch (error) {
      // Another upload (or a PATCH) gave it a source first: this one is stored, for a revision to name.
      if (error instanceof IllegalTransitionError) return { uploadId, objectPath };
      throw error;
    }
    await this.pipeline.build(latest.id);
    return { uploadId, objectPath, revisionId: latest.id };
  }

  /**
   * Where the gateway sends a deployment's traffic, the credential its agent server requires, and
   * the one its agent servers trace with.
   */
  async resolve(deploymentId: string): Promise<ResolvedDeployment & { credential: string; tracingCredential: string }> {
    const target = await this.store.resolve(deploymentId);
    if (!target) throw new NotFoundError(`Deployment ID ${deploymentId} not found.`);
    return {
      ...target,
      credential: target.revision_id ? this.secretBox.deploymentCredential(target.revision_id) : '',
      tracingCredential: deploymentTracingCredential(this.secretBox, deploymentId),
    };
  }

  /** How many deployments (of all tenants) have their serving revision down now. */
  async unhealthyCount(): Promise<number> {
    return this.store.unhealthyCount();
  }

  private async newRevision(deploymentId: string, source: DeploymentSource, config: RevisionConfig, first: boolean): Promise<NewRevision> {
    const revision: NewRevision = { id: randomUUID(), status: 'QUEUED', source, source_revision_config: { ...config } };
    if (source === 'external_docker') {
      if (!config.image_uri) throw problem(['body', 'source_revision_config', 'image_uri'], 'external_docker needs image_uri');
      return revision;
    }
    revision.source_revision_config.langgraph_config_path ??= 'langgraph.json';
    const path = config.source_tarball_path;
    if (path === undefined || path === null) {
      // The CLI creates a deployment first and uploads its source to it next.
      if (first) return { ...revision, status: 'AWAITING_SOURCE' };
      throw problem(
        ['body', 'source_revision_config', 'source_tarball_path'],
        'a new revision of an internal_source deployment needs source_tarball_path (upload the project first)',
      );
    }
    const ref = parseUploadRef(path);
    if (!ref || ref.deploymentId !== deploymentId || !(await this.store.uploadExists(ref.uploadId, deploymentId))) {
      throw problem(
        ['body', 'source_revision_config', 'source_tarball_path'],
        'source_tarball_path must be the object_path of a finished upload of this deployment',
      );
    }
    return { ...revision, source_upload_id: ref.uploadId };
  }

  private seal(secrets: { name: string; value: string }[]): SealedSecret[] {
    const max = this.maxSecretsPerDeployment;
    if (secrets.length > max) throw problem(['body', 'secrets'], `at most ${max} secrets per deployment on this platform`);
    const seen = new Set<string>();
    return secrets.map((secret, index) => {
      if (!isSecretName(secret.name)) throw problem(['body', 'secrets', index, 'name'], SECRET_NAME_RULE);
      if (seen.has(secret.name)) throw problem(['body', 'secrets', index, 'name'], `secret ${secret.name} is given twice`);
      seen.add(secret.name);
      return { name: secret.name, sealed: this.secretBox.seal(secret.value) };
    });
  }

  private async view(row: DeploymentRow): Promise<DeploymentView> {
    return (await this.views([row]))[0]!;
  }

  private async views(rows: DeploymentRow[]): Promise<DeploymentView[]> {
    const [names, revisions] = await Promise.all([
      this.store.secrets.names(rows.map((r) => r.id)),
      this.store.revisionDetails(rows.flatMap((r) => [r.latest_revision_id, r.active_revision_id].filter((id): id is string => id !== null))),
    ]);
    return rows.map((row) => {
      const latest = (row.latest_revision_id && revisions.get(row.latest_revision_id)) || null;
      const serving = (row.active_revision_id && revisions.get(row.active_revision_id)) || null;
      const { status, message } = deploymentStatus({ serving, latest });
      return {
        ...row,
        secret_names: names.get(row.id) ?? [],
        source_revision_config: latest?.source_revision_config ?? {},
        health_message: serving?.health_message ?? null,
        status,
        status_message: message,
      };
    });
  }
}

/**
 * The credential a deployment's agent servers trace with: derived from the platform key, so it needs
 * no storage; the same for every revision, and it stops working when the deployment is deleted
 * (the gateway resolves it through `resolve`).
 */
export function deploymentTracingCredential(secretBox: SecretBox, deploymentId: string): string {
  return tracingCredential(deploymentId, secretBox.derive(`tracing-credential/${deploymentId}`));
}
