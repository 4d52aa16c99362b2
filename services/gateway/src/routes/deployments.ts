/**
 * The deployment API (`/v2/deployments…`, area A of the platform interface): REST in the shapes
 * of the LangSmith control plane, translated to `berth.controlplane.v1.DeploymentService` calls.
 * Every call carries the caller's tenant; another tenant's deployment is NOT_FOUND there, so it
 * is a 404 here, indistinguishable from one that never existed.
 *
 * Ids: deployment and revision ids are UUIDs. A path id that is not one is answered 404, like
 * an unknown id (and like the `/d/{deployment_id}` proxy answers it), rather than 422: to a
 * client both mean "no such deployment", and a malformed id never reaches the control plane.
 */
import { NotFoundError } from '@berth/errors';
import { timestampDate, type Deployment, type Revision, type Secret } from '@berth/proto';
import type { JsonObject } from '@bufbuild/protobuf';
import type { Request } from 'express';
import type { z } from 'zod';
import type { ControlPlaneClients } from '../control-plane.js';
import type { ExportWorkerClients } from '../export-worker.js';
import {
  CreateDeploymentBody,
  deploymentStatuses,
  DeploymentListOut,
  DeploymentOut,
  DeploymentPath,
  ListDeploymentsQuery,
  ListRevisionsQuery,
  RevisionListOut,
  RevisionOut,
  RevisionPath,
  revisionStatuses,
  SecretPath,
  SetSecretBody,
  UNKNOWN_STATUS,
  UpdateDeploymentBody,
  WebhookSecretOut,
} from '../deployment-schemas.js';
import { pathUuid } from '../path-ids.js';
import { publicOrigin } from './auth-flows.js';
import { EmptyBody } from './sandboxes/schemas.js';
import type { GatewayApi } from '../access.js';

export interface DeploymentRouteDeps {
  controlPlane: ControlPlaneClients;
  /** The trace store, where a new deployment's tracing project is got or created. */
  exportWorker?: ExportWorkerClients;
  /** Base URL of deployment URLs; the request's own origin when unset. */
  publicUrl?: string;
}

/**
 * The id of the tenant's tracing project named after a new deployment, created when missing: the
 * project `berth dev` traced into from the same folder, or a deleted deployment of that name left,
 * goes on. '' (the control plane picks a new id) when no export-worker is configured.
 */
async function tracingProjectOf(exportWorker: ExportWorkerClients | undefined, tenantId: string, name: string): Promise<string> {
  if (!exportWorker?.configured) return '';
  const answer = await exportWorker.traces.createSession({ tenantId, name, upsert: true });
  return found(answer.session, 'Tracing project').id;
}

/** The id as the control plane stores it, or a 404 for text that cannot be an id. */
export function deploymentIdOf(id: string): string {
  return pathUuid(id, `Deployment ID ${id} not found.`);
}

export function revisionIdOf(id: string): string {
  return pathUuid(id, `Revision ID ${id} not found.`);
}

/** `{base}/d/{id}`: where the gateway proxies a deployment's traffic (see proxy/deployment-proxy.ts). */
export function deploymentUrl(req: Request, publicUrl: string | undefined, deploymentId: string): string {
  return `${publicOrigin(req, publicUrl)}/d/${deploymentId}`;
}

const iso = (t: Parameters<typeof timestampDate>[0] | undefined) => (t ? timestampDate(t) : new Date(0)).toISOString();

export function deploymentJson(d: Deployment, url: string): z.input<typeof DeploymentOut> {
  return {
    id: d.id,
    tenant_id: d.tenantId,
    name: d.name,
    source: d.source,
    source_config: d.sourceConfig ?? {},
    source_revision_config: d.sourceRevisionConfig ?? {},
    status: deploymentStatuses.decode(d.status) ?? UNKNOWN_STATUS,
    latest_revision_id: d.latestRevisionId || null,
    active_revision_id: d.activeRevisionId || null,
    secrets: d.secretNames.map((name) => ({ name })),
    session_id: d.sessionId || null,
    deployment_url: url,
    created_at: iso(d.createdAt),
    updated_at: iso(d.updatedAt),
    health_message: d.healthMessage || null,
    status_message: d.statusMessage || null,
  };
}

export function revisionJson(r: Revision): z.input<typeof RevisionOut> {
  return {
    id: r.id,
    deployment_id: r.deploymentId,
    status: revisionStatuses.decode(r.status) ?? UNKNOWN_STATUS,
    source: r.source,
    source_revision_config: r.sourceRevisionConfig ?? {},
    status_message: r.statusMessage,
    created_at: iso(r.createdAt),
    updated_at: iso(r.updatedAt),
  };
}

/** A google.protobuf.Struct holds JSON values only: drop the keys zod left undefined. */
function struct(value: object): JsonObject {
  return JSON.parse(JSON.stringify(value)) as JsonObject;
}

/**
 * When a change of secrets reaches the agent servers, said once for every route that changes them
 * (Deployments.setSecret in the control plane decides it).
 */
const SECRET_CHANGE_TAKES_EFFECT =
  'Like `secrets` in a PATCH, this makes no revision and restarts nothing: the agent servers running now keep the ' +
  'environment they started with (`latest_revision_id` and the revisions list stay as they were), and the next ' +
  'revision to deploy, one on its way now included, gets the change. To apply it now, deploy the serving revision ' +
  'again (`POST /v2/deployments/{deployment_id}/revisions/{active_revision_id}/redeploy`): the change is live once ' +
  'that new revision is DEPLOYED.';

function secretsOf(secrets: { name: string; value: string }[]): Secret[] {
  return secrets.map((s) => ({ name: s.name, value: s.value }) as Secret);
}

function found<T>(value: T | undefined, what: string): T {
  // Only a broken control plane answers OK without the resource.
  if (value === undefined) throw new NotFoundError(`${what} not found.`);
  return value;
}

export function deploymentRoutes(api: GatewayApi, deps: DeploymentRouteDeps): void {
  const rpc = () => deps.controlPlane.deployments;
  const urlOf = (req: Request, id: string) => deploymentUrl(req, deps.publicUrl, id);
  const tags = ['deployments'];

  api
    .route({
      method: 'post',
      path: '/v2/deployments',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create a deployment (and its first revision)',
      description:
        'The first revision of an `internal_source` deployment without a `source_tarball_path` waits (AWAITING_SOURCE) ' +
        'for `POST /v2/deployments/{deployment_id}/upload`, whose upload starts its build. `deployment_type` defaults ' +
        'to dev. `deployment_url` is where the deployment answers once a revision is DEPLOYED.',
      tags,
      body: CreateDeploymentBody,
      status: 201,
      response: DeploymentOut,
      errors: [409, 503],
      handler: async ({ body, auth, req }) => {
        const sourceConfig = { ...(body.source_config ?? {}), deployment_type: body.source_config?.deployment_type ?? 'dev' };
        const sessionId = await tracingProjectOf(deps.exportWorker, auth.tenantId, body.name);
        const answer = await rpc().createDeployment({
          sessionId,
          tenantId: auth.tenantId,
          name: body.name,
          source: body.source,
          sourceConfig: struct(sourceConfig),
          sourceRevisionConfig: struct(body.source_revision_config ?? {}),
          secrets: secretsOf(body.secrets ?? []),
        });
        const deployment = found(answer.deployment, 'Deployment');
        return deploymentJson(deployment, urlOf(req, deployment.id));
      },
    })
    .route({
      method: 'get',
      path: '/v2/deployments',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List deployments, newest first',
      description: 'Answers `{resources, offset}`; pass `offset` back to read the next page.',
      tags,
      query: ListDeploymentsQuery,
      response: DeploymentListOut,
      errors: [503],
      handler: async ({ query, auth, req }) => {
        const answer = await rpc().listDeployments({
          tenantId: auth.tenantId,
          nameContains: query.name_contains ?? '',
          deploymentType: query.deployment_type ?? '',
          limit: query.limit,
          offset: query.offset,
        });
        return { resources: answer.resources.map((d) => deploymentJson(d, urlOf(req, d.id))), offset: answer.offset };
      },
    })
    .route({
      method: 'get',
      path: '/v2/deployments/{deployment_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a deployment',
      tags,
      params: DeploymentPath,
      response: DeploymentOut,
      errors: [404, 503],
      handler: async ({ params, auth, req }) => {
        const deploymentId = deploymentIdOf(params.deployment_id);
        const answer = await rpc().getDeployment({ tenantId: auth.tenantId, deploymentId });
        return deploymentJson(found(answer.deployment, `Deployment ID ${deploymentId}`), urlOf(req, deploymentId));
      },
    })
    .route({
      method: 'patch',
      path: '/v2/deployments/{deployment_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Update a deployment',
      description:
        'Fields left out (or null) are not changed. A `source_revision_config` makes a new revision (with ' +
        '`source_tarball_path` set to the `object_path` of an upload, for `internal_source`); `secrets` replaces every ' +
        'secret of the deployment; `source_config` changes alone make no revision.',
      tags,
      params: DeploymentPath,
      body: UpdateDeploymentBody,
      response: DeploymentOut,
      errors: [404, 409, 503],
      handler: async ({ params, body, auth, req }) => {
        const deploymentId = deploymentIdOf(params.deployment_id);
        const answer = await rpc().updateDeployment({
          tenantId: auth.tenantId,
          deploymentId,
          ...(body.source_config ? { sourceConfig: struct(body.source_config) } : {}),
          ...(body.source_revision_config ? { sourceRevisionConfig: struct(body.source_revision_config) } : {}),
          replaceSecrets: body.secrets != null,
          secrets: secretsOf(body.secrets ?? []),
        });
        return deploymentJson(found(answer.deployment, `Deployment ID ${deploymentId}`), urlOf(req, deploymentId));
      },
    })
    .route({
      method: 'delete',
      path: '/v2/deployments/{deployment_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete a deployment',
      description: 'Its agent server stops, and its revisions, logs, secrets and uploads are removed.',
      tags,
      params: DeploymentPath,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteDeployment({ tenantId: auth.tenantId, deploymentId: deploymentIdOf(params.deployment_id) });
      },
    })
    .route({
      method: 'put',
      path: '/v2/deployments/{deployment_id}/secrets/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Set one secret (an environment variable of the agent server)',
      description:
        'Adds the secret `name` or replaces its value; the other secrets stay as they are. The value is stored ' +
        'encrypted and never returned: the answer is the deployment, which lists secret names only. ' +
        SECRET_CHANGE_TAKES_EFFECT +
        ' A deployment has at most 200 secrets (fewer when the operator sets `BERTH_MAX_SECRETS_PER_DEPLOYMENT`): ' +
        'a new name past that is a 429.',
      tags,
      params: SecretPath,
      body: SetSecretBody,
      response: DeploymentOut,
      errors: [404, 429, 503],
      handler: async ({ params, body, auth, req }) => {
        const deploymentId = deploymentIdOf(params.deployment_id);
        const answer = await rpc().setSecret({ tenantId: auth.tenantId, deploymentId, name: params.name, value: body.value });
        return deploymentJson(found(answer.deployment, `Deployment ID ${deploymentId}`), urlOf(req, deploymentId));
      },
    })
    .route({
      method: 'delete',
      path: '/v2/deployments/{deployment_id}/secrets/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Remove one secret',
      description: 'Removes the secret `name`; 404 when the deployment has no secret of that name. ' + SECRET_CHANGE_TAKES_EFFECT,
      tags,
      params: SecretPath,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteSecret({ tenantId: auth.tenantId, deploymentId: deploymentIdOf(params.deployment_id), name: params.name });
      },
    })
    .route({
      method: 'get',
      path: '/v2/deployments/{deployment_id}/revisions',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List revisions of a deployment, newest first',
      tags,
      params: DeploymentPath,
      query: ListRevisionsQuery,
      response: RevisionListOut,
      errors: [404, 503],
      handler: async ({ params, query, auth }) => {
        const answer = await rpc().listRevisions({
          tenantId: auth.tenantId,
          deploymentId: deploymentIdOf(params.deployment_id),
          limit: query.limit,
          offset: query.offset,
          statuses: (query.status ?? []).map((status) => revisionStatuses.encode(status)),
        });
        return { resources: answer.resources.map(revisionJson), offset: answer.offset };
      },
    })
    .route({
      method: 'get',
      path: '/v2/deployments/{deployment_id}/revisions/{revision_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a revision (poll its status until DEPLOYED)',
      tags,
      params: RevisionPath,
      response: RevisionOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        const revisionId = revisionIdOf(params.revision_id);
        const answer = await rpc().getRevision({ tenantId: auth.tenantId, deploymentId: deploymentIdOf(params.deployment_id), revisionId });
        return revisionJson(found(answer.revision, `Revision ID ${revisionId}`));
      },
    })
    .route({
      method: 'post',
      path: '/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Deploy an earlier revision again',
      tags,
      params: RevisionPath,
      response: DeploymentOut,
      errors: [404, 409, 503],
      handler: async ({ params, auth, req }) => {
        const deploymentId = deploymentIdOf(params.deployment_id);
        const answer = await rpc().redeployRevision({ tenantId: auth.tenantId, deploymentId, revisionId: revisionIdOf(params.revision_id) });
        return deploymentJson(found(answer.deployment, `Deployment ID ${deploymentId}`), urlOf(req, deploymentId));
      },
    })
    .route({
      method: 'post',
      path: '/v2/deployments/{deployment_id}/webhook-secret',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Rotate the run-webhook signing secret',
      description:
        "Makes a new secret with which the deployment's agent servers sign run webhooks (`whsec_…`, Standard " +
        'Webhooks) and answers it: this is the only place it is ever shown, so keep it. The serving revision is ' +
        'deployed again (a new revision of the same source), whose agent servers sign with the new secret; until it is ' +
        'DEPLOYED the old one still signs. A deployment with no serving revision yet gets it at its first deploy.',
      tags,
      params: DeploymentPath,
      body: EmptyBody,
      status: 201,
      response: WebhookSecretOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        const answer = await rpc().rotateWebhookSecret({ tenantId: auth.tenantId, deploymentId: deploymentIdOf(params.deployment_id) });
        return { secret: answer.secret, created_at: iso(answer.createdAt) };
      },
    });
}
