/**
 * Request and response schemas of the deployment API (`/v2/deployments…`), in the shapes of the
 * LangSmith control plane's REST API. Request objects are strict at every level (an unknown or
 * misspelt field is a 422, never silently dropped); response objects strip what they do not
 * declare, so nothing the control plane adds later leaks unreviewed (secret values above all).
 */
import { DeploymentName, SECRET_NAME_RULE, SecretName } from '@berth/ids';
import { wireEnum } from '@berth/lifecycle';
import { DeploymentStatus, RevisionStatus } from '@berth/proto';
import { z } from 'zod';

const timestamp = z.iso.datetime({ offset: true });

/**
 * Revision and deployment statuses: REST spells each as the name of its value in the control
 * plane's enum (`berth.controlplane.v1.RevisionStatus`, `DeploymentStatus`), so this list is the
 * enum's. A value this gateway does not know (a newer control plane's) is answered as UNKNOWN.
 */
export const revisionStatuses = wireEnum(RevisionStatus);
export const deploymentStatuses = wireEnum(DeploymentStatus);
export const UNKNOWN_STATUS = 'UNKNOWN';

const integerText = /^\s*[+-]?\d+\s*$/;

/**
 * An integer query parameter: query values arrive as text and only an integer literal counts
 * ("", "1.5", "1e2" are 422s, which `z.coerce` would let through as 0, 1.5 and 100).
 */
export function intQuery(min: number, max: number, fallback: number, description: string) {
  return z
    .preprocess(
      (v) => (typeof v === 'string' && integerText.test(v) ? Number(v) : v),
      z
        .int({ error: 'Input should be a valid integer' })
        .min(min, { error: `Input should be greater than or equal to ${min}` })
        .max(max, { error: `Input should be less than or equal to ${max}` }),
    )
    .default(fallback)
    .meta({ default: fallback })
    .describe(description);
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

export const ResourceSpec = z.strictObject({
  min_scale: z.int().min(0).max(100).optional().describe('Fewest replicas'),
  max_scale: z.int().min(1).max(100).optional().describe('Most replicas'),
  cpu: z.number().positive().max(64).optional().describe('CPU cores per replica'),
  memory_mb: z.int().min(128).max(262_144).optional().describe('Memory per replica, in MB'),
});

export const SourceConfig = z.strictObject({
  deployment_type: z.enum(['dev', 'prod']).optional().describe('dev (the default) or prod; immutable'),
  resource_spec: ResourceSpec.nullable().optional(),
});

export const SourceRevisionConfig = z.strictObject({
  langgraph_config_path: z.string().min(1).max(1024).nullable().optional().describe('Path of langgraph.json inside the project (internal_source)'),
  image_uri: z.string().min(1).max(2048).nullable().optional().describe('Container image (external_docker)'),
  source_tarball_path: z.string().min(1).max(1024).nullable().optional().describe('The object_path of an upload (POST /v2/deployments/{deployment_id}/upload)'),
});

const SecretValue = z.string().max(65_536).describe('The value, at most 65536 characters; never returned');

const SecretIn = z.strictObject({
  name: SecretName,
  value: SecretValue,
});

/** `PUT /v2/deployments/{deployment_id}/secrets/{name}`. */
export const SetSecretBody = z.strictObject({ value: SecretValue });

const Secrets = z
  .array(SecretIn)
  .max(200)
  .superRefine((secrets, ctx) => {
    const seen = new Set<string>();
    secrets.forEach((secret, index) => {
      if (seen.has(secret.name)) ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `Duplicate secret name ${secret.name}` });
      seen.add(secret.name);
    });
  })
  .describe('Environment variables of the agent server, stored encrypted; values are never returned');

export const CreateDeploymentBody = z
  .strictObject({
    name: DeploymentName.describe('Unique in the tenant; immutable'),
    source: z.enum(['internal_source', 'external_docker']).describe('An uploaded project tarball, or a container image'),
    source_config: SourceConfig.nullable().optional(),
    source_revision_config: SourceRevisionConfig.nullable().optional(),
    secrets: Secrets.nullable().optional(),
  })
  .superRefine((body, ctx) => {
    if (body.source === 'external_docker' && !body.source_revision_config?.image_uri) {
      ctx.addIssue({ code: 'custom', path: ['source_revision_config', 'image_uri'], message: 'external_docker deployments need an image_uri' });
    }
  });

export const UpdateDeploymentBody = z.strictObject({
  source_config: SourceConfig.nullable().optional().describe('Changes alone do not make a new revision'),
  source_revision_config: SourceRevisionConfig.nullable().optional().describe('When given (not null), a new revision is made from it'),
  secrets: Secrets.nullable().optional().describe('When given (not null), replaces all secrets of the deployment'),
});

export const DeploymentOut = z.object({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  source: z.string(),
  source_config: z.record(z.string(), z.unknown()),
  source_revision_config: z.record(z.string(), z.unknown()),
  status: z
    .enum([...deploymentStatuses.states, UNKNOWN_STATUS])
    .describe(
      'AWAITING_DEPLOY (no revision serves yet; the latest is on its way), READY (a revision serves), UNHEALTHY (the serving ' +
        'revision is down and being restarted), FAILED (the latest revision failed and none serves: its URL answers 503 until ' +
        'a new revision deploys) or LATEST_FAILED (the latest revision failed; an older one still serves). See status_message',
    ),
  latest_revision_id: z.string().nullable(),
  active_revision_id: z.string().nullable().describe('The revision serving traffic; null until one is DEPLOYED'),
  secrets: z.array(z.object({ name: z.string() })).describe('Names only'),
  session_id: z.string().nullable(),
  deployment_url: z.string().describe('Where the agent server of this deployment answers'),
  created_at: timestamp,
  updated_at: timestamp,
  health_message: z.string().nullable().describe('Why the serving revision does not answer now (status UNHEALTHY); null otherwise'),
  status_message: z
    .string()
    .nullable()
    .describe(
      "Why the deployment has its status: the serving revision's health (UNHEALTHY), or which revision failed and why (FAILED, LATEST_FAILED); null otherwise",
    ),
});

export const RevisionOut = z.object({
  id: z.string(),
  deployment_id: z.string(),
  status: z.enum([...revisionStatuses.states, UNKNOWN_STATUS]).describe('Where the revision is in its lifecycle (docs/deployments.md)'),
  source: z.string(),
  source_revision_config: z.record(z.string(), z.unknown()),
  status_message: z.string().describe('Why it failed or was interrupted; empty otherwise'),
  created_at: timestamp,
  updated_at: timestamp,
});

export const DeploymentListOut = z.object({
  resources: z.array(DeploymentOut),
  offset: z.int().describe('Pass as offset to read the next page'),
});

export const RevisionListOut = z.object({
  resources: z.array(RevisionOut),
  offset: z.int().describe('Pass as offset to read the next page'),
});

export const LogEntryOut = z.object({
  id: z.int(),
  timestamp,
  level: z.string().describe('info, warn or error'),
  message: z.string(),
  type: z.string().describe('build or deploy'),
});

export const LogsOut = z.object({
  logs: z.array(LogEntryOut),
  next_offset: z.int().describe('Pass as offset to read on from the last entry returned'),
  revision_id: z.string().nullable(),
});

export const UploadOut = z.object({
  object_path: z.string().describe('What source_revision_config.source_tarball_path takes'),
  revision_id: z.string().nullable().describe('The revision whose build this upload started, if one waited for it'),
});

export const WebhookSecretOut = z.object({
  secret: z.string().describe('The signing secret (whsec_…, Standard Webhooks); shown only in this answer'),
  created_at: z.string().describe('When this secret was made'),
});

// Ids are plain strings here: a malformed id is a 404 like an unknown one (see routes/deployments.ts).
export const DeploymentPath = z.strictObject({ deployment_id: z.string() });
export const RevisionPath = z.strictObject({ deployment_id: z.string(), revision_id: z.string() });
export const SecretPath = z.strictObject({ deployment_id: z.string(), name: SecretName.describe(SECRET_NAME_RULE) });

export const ListDeploymentsQuery = z.strictObject({
  name_contains: z.string().max(63).optional().describe('Only deployments whose name contains this text'),
  deployment_type: z.enum(['dev', 'prod']).optional(),
  limit: intQuery(1, 100, 20, 'Page size, 1 to 100'),
  offset: intQuery(0, MAX_SAFE, 0, 'Deployments to skip'),
});

export const ListRevisionsQuery = z.strictObject({
  limit: intQuery(1, 100, 20, 'Page size, 1 to 100'),
  offset: intQuery(0, MAX_SAFE, 0, 'Revisions to skip'),
  status: z
    .string()
    .transform((text) =>
      text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.enum(revisionStatuses.states)))
    .optional()
    .describe('Only revisions in these statuses (comma-separated)'),
});

export const LogsQuery = z
  .strictObject({
    type: z.enum(['build', 'deploy']).optional().describe('build or deploy logs; both when omitted'),
    offset: intQuery(0, MAX_SAFE, 0, 'Entries with an id above this (the next_offset of the previous page)'),
    limit: intQuery(1, 1000, 100, 'Entries per page, 1 to 1000 (not with follow)'),
    since: timestamp.optional().describe('Only entries written at or after this time (ISO 8601 with an offset)'),
    until: timestamp.optional().describe('Only entries written before this time (not with follow)'),
    follow: z.stringbool().optional().describe('true: answer server-sent events, the entries there are and then each new one, until the log ends'),
  })
  .superRefine((query, ctx) => {
    if (query.since && query.until && Date.parse(query.since) >= Date.parse(query.until)) {
      ctx.addIssue({ code: 'custom', path: ['until'], message: 'until must be after since' });
    }
    if (query.follow && query.until) ctx.addIssue({ code: 'custom', path: ['until'], message: 'a followed log has no end time: leave out until or follow' });
  });
