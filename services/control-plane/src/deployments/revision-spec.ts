/**
 * What a revision's agent servers start with (the deployer's RevisionSpec): its build or image,
 * the deployment's secrets, resources, and an environment of credentials of the deployment's own —
 * its database login, Redis user, webhook secret and tracing credential, never a platform one.
 */
import { generateWebhookSecret } from '@berth/agent-contract';
import type { RevisionArtifact, RevisionSpec } from '../deployers/deployer.js';
import { artifactCredential, artifactPath } from '../artifacts/artifact-server.js';
import type { ProjectBuilder } from '../build/index.js';
import type { TracingEndpoint } from '../config.js';
import type { Deployer } from '../deployers/deployer.js';
import type { ArtifactStore } from '../artifacts/artifact-store.js';
import type { SecretBox } from '@berth/secret-box';
import { agentSchema, type AgentDatabases } from './agent-databases.js';
import type { AgentRedis } from './agent-redis.js';
import { langGraphConfigPath, revisionImage } from './revision-config.js';
import { deploymentTracingCredential } from './service.js';
import type { DeploymentRow, DeploymentStore, RevisionRow } from './store.js';

/** What a spec is made from (the pipeline's PipelineDeps, where each is described). */
export interface SpecDeps {
  store: DeploymentStore;
  secretBox: SecretBox;
  builder: ProjectBuilder;
  deployer: Deployer;
  databases: AgentDatabases;
  redis?: AgentRedis;
  agentEnv: Record<string, string>;
  tracingEndpoint?: TracingEndpoint;
  archives?: { store: ArtifactStore; url: string };
}

/** What the deployer starts `revision` with; `restoring`: it serves, and is brought back after a control-plane restart. */
export async function revisionSpec(deps: SpecDeps, deployment: DeploymentRow, revision: RevisionRow, restoring = false): Promise<RevisionSpec> {
  const secrets = Object.fromEntries((await deps.store.secrets.sealed(deployment.id)).map((s) => [s.name, deps.secretBox.open(s.sealed)]));
  const resourceSpec = (deployment.source_config.resource_spec ?? {}) as { min_scale?: number; cpu?: number; memory_mb?: number };
  const artifact: RevisionArtifact =
    revision.source === 'external_docker'
      ? { kind: 'image', imageUri: revisionImage(revision) }
      : {
          kind: 'directory',
          path: deps.builder.folderOf(revision.artifact_path!),
          configPath: langGraphConfigPath(revision.source_revision_config),
          ...(deps.archives && revision.archive_key && revision.archive_sha256
            ? {
                archive: {
                  url: deps.archives.url + artifactPath(revision.id),
                  sha256: revision.archive_sha256,
                  credential: artifactCredential(deps.secretBox, revision.id),
                },
              }
            : {}),
        };
  return {
    deploymentId: deployment.id,
    revisionId: revision.id,
    tenantId: deployment.tenant_id,
    name: deployment.name,
    deploymentType: deployment.deployment_type,
    artifact,
    secrets,
    env: {
      ...deps.agentEnv,
      // A login of the deployment's own, with a password fresh for this revision.
      DATABASE_URL: await databaseLogin(deps, deployment, revision.id, restoring),
      BERTH_AGENT_SCHEMA: agentSchema(deployment.id),
      // The deployment's own Redis user, created again here in case Redis lost it.
      ...(deps.redis ? { REDIS_URL: await deps.redis.ensure(deployment.id) } : {}),
      BERTH_DEPLOYMENT_CREDENTIAL: deps.secretBox.deploymentCredential(revision.id),
      BERTH_WEBHOOK_SECRET: await webhookSecret(deps, deployment.id),
      ...(await tracingEnv(deps, deployment)),
    },
    resources: {
      replicas: resourceSpec.min_scale ?? (deployment.deployment_type === 'prod' ? 2 : 1),
      ...(resourceSpec.cpu !== undefined ? { cpu: resourceSpec.cpu } : {}),
      ...(resourceSpec.memory_mb !== undefined ? { memoryMb: resourceSpec.memory_mb } : {}),
    },
  };
}

/**
 * The connection of the deployment's database login `revisionId` starts with, with a fresh
 * password, recorded with the revision. A new revision takes the login the serving one does not
 * use, even when that one holds no session yet (it is itself starting again after a control-plane
 * restart, and a retry of it must not rotate the new revision's password, nor the reverse). A
 * serving revision brought back locally takes its own login again (its process is gone); one that
 * outlived the control plane (Kubernetes) the other, as its pods still use theirs. Rows from
 * before logins were recorded fall back to the count of sessions.
 */
async function databaseLogin(deps: SpecDeps, deployment: DeploymentRow, revisionId: string, restoring: boolean): Promise<string> {
  const { store, databases, deployer } = deps;
  const serving = deployment.active_revision_id ? await store.revisionById(deployment.active_revision_id) : undefined;
  const own = restoring && !deployer.revisionsSurviveClose ? serving?.database_login : undefined;
  const login = await databases.provision(deployment.id, own ? { use: own } : serving?.database_login ? { avoid: serving.database_login } : {});
  await store.setDatabaseLogin(revisionId, login.role);
  return login.url;
}

/** The deployment's webhook signing secret; one made before they existed gets its own now. */
async function webhookSecret(deps: SpecDeps, deploymentId: string): Promise<string> {
  const { store, secretBox } = deps;
  const sealed = await store.webhookSecret(deploymentId);
  if (sealed) return secretBox.open(sealed);
  await store.setWebhookSecret(deploymentId, secretBox.seal(generateWebhookSecret()), false);
  return secretBox.open((await store.webhookSecret(deploymentId))!);
}

/**
 * What the agent server traces its runs with: the gateway's trace API, the deployment's own tracing
 * credential (never a tenant's API key: it may write and read this deployment's tracing project
 * only) and the project, named after the deployment.
 */
async function tracingEnv(deps: SpecDeps, deployment: DeploymentRow): Promise<Record<string, string>> {
  const endpoint = deps.tracingEndpoint;
  if (endpoint === undefined) return {};
  return {
    BERTH_TRACING_ENDPOINT: typeof endpoint === 'string' ? endpoint : await endpoint(),
    BERTH_TRACING_API_KEY: deploymentTracingCredential(deps.secretBox, deployment.id),
    BERTH_TRACING_PROJECT: deployment.name,
  };
}
